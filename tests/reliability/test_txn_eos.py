# Exactly-once consume-transform-produce with confluent-kafka, the processor SIGKILLed at
# random points: a processor (this file run as a script) reads the input topic at
# read_committed from its group's committed offsets, and for each batch writes the
# transformed records to the output topic and the input offsets (send_offsets_to_transaction)
# in one transaction. It is killed at a random moment, CYCLES times, each new instance
# fencing the last (same transactional.id: init_transactions aborts what the dead one left
# open); a last instance runs until the input is consumed. The output read at read_committed
# then holds every input record exactly once. Bounded in CI; 50 cycles behind the long-run
# marker (KAFKALITE_LONG=1).
from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
import uuid

import pytest

PARTITIONS = 3
RECORDS = 600
BATCH = 15
PROCESS_TIMEOUT_S = 90


def process(bootstrap: str, source: str, sink: str, group: str, total: int,
            progress: str) -> int:
    """The processor: 0 once every input record is processed and committed. It appends
    the count processed to `progress` after each commit, and keeps transactions small and
    paced so that the kills land mid-stream."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"eos-{group}",
                  "linger.ms": 5})
    p.init_transactions(30)  # fences the previous instance, aborts its transaction
    # assign(), not subscribe(): a killed member would hold its partitions for a session.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    parts = [TopicPartition(source, i) for i in range(PARTITIONS)]
    deadline = time.monotonic() + 60
    while True:  # require_stable: waits for pending offsets
        try:
            committed = c.committed(parts, 30)
            break
        except KafkaException as e:
            # Kafka answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it creates
            # and loads __consumer_offsets; a real processor retries those.
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    start = {t.partition: max(t.offset, 0) for t in committed}
    c.assign([TopicPartition(source, i, o) for i, o in start.items()])
    # A partition this instance has not read from yet has no position (-1001): its offset
    # is still the committed one.
    at = dict(start)
    done = sum(at.values())
    while done < total:
        msgs = c.consume(BATCH, 1.0)
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            p.produce(sink, m.value().upper(), key=m.key())
        positions = [t for t in c.position(c.assignment()) if t.offset >= 0]
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        at.update((t.partition, t.offset) for t in positions)
        done = sum(at.values())
        with open(progress, "a") as f:
            f.write(f"{done}\n")
        time.sleep(0.05)
    c.close()
    return 0


def _produce_input(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [b"rec-%05d" % i for i in range(RECORDS)]
    for i, v in enumerate(values):
        p.produce(topic, v, key=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0
    return values


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and (len(eof) < PARTITIONS or len(out) < expected):
            for m in c.consume(500, 0.5):
                if m.error():
                    eof.add(m.partition())
                else:
                    out.append(m.value())
        return out
    finally:
        c.close()


def _progress(path: str) -> int:
    try:
        with open(path) as f:
            lines = f.read().split()
    except FileNotFoundError:
        return 0
    return int(lines[-1]) if lines else 0


def _await_kill_point(rnd: random.Random, progress: str, proc: subprocess.Popen,
                      cycles_left: int) -> None:
    """Wait for a random kill point, paced by the processor's progress rather than by the
    clock, so that the kills land mid-stream on a fast broker and a slow one alike: a third
    of them early (start-up, init_transactions, the first fetch), the rest after a random
    share of what is left, plus a random moment inside the next transaction."""
    if rnd.random() < 0.3:
        time.sleep(rnd.uniform(0.05, 0.6))
        return
    start = _progress(progress)
    share = max(BATCH, (RECORDS - start) // (cycles_left + 1))
    target = start + rnd.randint(1, share)
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while _progress(progress) < target and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(rnd.uniform(0, 0.06))


def run_eos(bootstrap: str, cycles: int, seed: int, tmp: str) -> None:
    from tests.helpers.real_kafka import create_topic
    rnd = random.Random(seed)
    source, sink = f"eos-in-{uuid.uuid4().hex[:8]}", f"eos-out-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, source, partitions=PARTITIONS)
    create_topic(bootstrap, sink, partitions=PARTITIONS)
    values = _produce_input(bootstrap, source)
    progress = os.path.join(tmp, "progress")
    cmd = [sys.executable, __file__, bootstrap, source, sink, f"g-{source}", str(RECORDS),
           progress]
    killed_mid_stream = 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for i in range(cycles):
        with open(os.path.join(tmp, f"processor-{i}.log"), "wb") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _await_kill_point(rnd, progress, proc, cycles - i)
        if proc.poll() is not None:
            break  # finished the input before its kill
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_mid_stream += _progress(progress) < RECORDS
    # the kills must have interrupted the work, not a processor that had finished
    assert killed_mid_stream >= cycles // 2, (killed_mid_stream, _progress(progress))
    final = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=PROCESS_TIMEOUT_S)
    assert final.returncode == 0, final.stderr[-4000:]
    out = _read_committed(bootstrap, sink, RECORDS)
    counts = collections.Counter(out)
    expected = collections.Counter(v.upper() for v in values)
    missing = expected - counts
    duplicated = {v: n for v, n in counts.items() if n > 1}
    assert not missing and not duplicated and counts == expected, (
        f"seed {seed}: {len(missing)} missing, {len(duplicated)} duplicated "
        f"(e.g. {list(missing)[:3]}, {list(duplicated.items())[:3]})")


@pytest.fixture(params=["kafkalite", "kafka"])
def broker(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("kafka_broker" if request.param == "kafkalite"
                                   else "real_kafka")


def test_consume_transform_produce_survives_sigkill_exactly_once(broker, tmp_path):
    run_eos(broker, cycles=10, seed=int(os.environ.get("EOS_SEED", "13")), tmp=str(tmp_path))


@pytest.mark.long
def test_consume_transform_produce_survives_50_sigkills_exactly_once(broker, tmp_path):
    run_eos(broker, cycles=50, seed=int(os.environ.get("EOS_SEED", "1313")),
            tmp=str(tmp_path))


if __name__ == "__main__":
    sys.exit(process(*sys.argv[1:5], int(sys.argv[5]), sys.argv[6]))
