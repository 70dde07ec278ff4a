# Churn of a KIP-848 group: 3 to 5 confluent-kafka 2.16.1 consumers (group.protocol=consumer,
# commit-after-process, each in a child process) join, leave, are SIGKILLed and come back
# while a producer writes a bounded number of records. Afterwards every record was
# processed, none was committed twice, the group committed up to the end of every partition,
# a record processed twice was first taken by a consumer later SIGKILLed at or past its last
# commit on that partition (counted), and no consumer had a partition revoked and handed back
# in its next assignment (the partitions a member keeps are never revoked). About 60 s;
# KAFKALITE_LONG=1 runs a longer churn with more records. (No reference run: librdkafka
# 2.16's consumer protocol needs ConsumerGroupHeartbeat v1, Kafka 4.0+.)
from __future__ import annotations

import multiprocessing
import os
import json
import random
import signal
import time
import uuid
from collections import Counter, defaultdict

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import BrokerProcess
from tests.integration.test_consumer_protocol import (GROUP_SETTINGS, commit_sync, consumer,
                                                      create_topic)

LONG = os.environ.get("KAFKALITE_LONG") == "1"
PARTITIONS = 6


def worker(bootstrap: str, group: str, topic: str, name: str, path: str, stop) -> None:
    """Each event is one write(2) to the worker's own file: it survives a SIGKILL (a
    multiprocessing queue's feeder thread would lose what it had not sent yet)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    put = lambda *e: os.write(fd, (json.dumps([e[0], name, *e[1:]]) + "\n").encode())  # noqa: E731
    c = consumer(bootstrap, group)
    parts = lambda ps: sorted(p.partition for p in ps)  # noqa: E731
    c.subscribe([topic], on_assign=lambda _, ps: put("assign", parts(ps)),
                on_revoke=lambda _, ps: put("revoke", parts(ps)))
    while not stop.is_set():
        msg = c.poll(0.1)
        if msg is None or msg.error():
            continue
        put("seen", msg.value().decode(), msg.partition(), msg.offset())
        commit_sync(c, msg)
        put("committed", msg.value().decode(), msg.partition(), msg.offset())
    c.close()


class Churn:
    def __init__(self, bootstrap: str, group: str, topic: str, events_dir):
        self.args = (bootstrap, group, topic)
        self.ctx = multiprocessing.get_context("spawn")
        self.dir = events_dir
        self.live: dict[str, tuple] = {}  # name -> (process, stop event)
        self.killed: set[str] = set()
        self.n = 0
        self.log: list[tuple] = []

    def start(self) -> None:
        self.n += 1
        name = f"w{self.n}"
        stop = self.ctx.Event()
        proc = self.ctx.Process(target=worker, daemon=True, args=(
            *self.args, name, str(self.dir / f"{name}.jsonl"), stop))
        proc.start()
        self.live[name] = (proc, stop)

    def leave(self, name: str) -> None:
        proc, stop = self.live.pop(name)
        stop.set()
        proc.join(30)

    def kill(self, name: str) -> None:
        proc, _ = self.live.pop(name)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        self.killed.add(name)

    def events(self) -> list[list]:
        """Every worker's events, each worker's in its order (the checks are per worker)."""
        out = []
        for i in range(1, self.n + 1):
            path = self.dir / f"w{i}.jsonl"
            if path.exists():
                out += [json.loads(line) for line in path.read_text().splitlines()
                        if line.endswith("]")]
        return out

    def stop_all(self) -> None:
        for name in list(self.live):
            self.leave(name)


def end_offsets(bootstrap: str, group: str, topic: str) -> tuple[list[int], list[int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        committed = [tp.offset for tp in c.committed(tps, timeout=10)]
        return ends, committed
    finally:
        c.close()


def test_churning_group_processes_every_record_and_commits_each_once(tmp_path):
    total, churn_s = (6000, 180) if LONG else (900, 35)
    rng = random.Random(848)
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=GROUP_SETTINGS).start()
    topic, group = f"ch-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    churn = Churn(bp.bootstrap, group, topic, tmp_path)
    try:
        create_topic(bp.bootstrap, topic, PARTITIONS)
        producer = Producer({"bootstrap.servers": bp.bootstrap, "linger.ms": 5})
        for _ in range(3):
            churn.start()
        produced, start = 0, time.monotonic()
        next_action = start + 3
        while time.monotonic() - start < churn_s:
            batch = min(total * 1 // churn_s // 2 + 1, total - produced)
            for _ in range(batch):
                producer.produce(topic, f"{topic}-{produced}".encode(),
                                 partition=produced % PARTITIONS)
                produced += 1
            producer.flush(10)
            if time.monotonic() >= next_action:
                action = rng.choice(["leave", "kill", "start"])
                if action != "start" and len(churn.live) > 3:
                    getattr(churn, action)(rng.choice(sorted(churn.live)))
                elif len(churn.live) < 5:
                    churn.start()
                next_action = time.monotonic() + rng.uniform(2, 5)
            time.sleep(0.5)
        while produced < total:
            producer.produce(topic, f"{topic}-{produced}".encode(),
                             partition=produced % PARTITIONS)
            produced += 1
        assert producer.flush(30) == 0
        while len(churn.live) < 3:
            churn.start()
        want = {f"{topic}-{i}" for i in range(total)}
        deadline = time.monotonic() + 90
        while True:  # until the group has committed up to the end of every partition
            ends, group_committed = end_offsets(bp.bootstrap, group, topic)
            if group_committed == ends:
                break
            assert time.monotonic() < deadline, (ends, group_committed)
            time.sleep(1)
        churn.stop_all()
        log = churn.events()

        seen = Counter(e[2] for e in log if e[0] == "seen")
        committed = Counter(e[2] for e in log if e[0] == "committed")
        assert set(seen) == want
        assert [v for v, n in committed.items() if n > 1] == []
        # A record processed twice: its first taker was SIGKILLed and had not committed past it.
        first: dict[str, tuple] = {}
        last_commit: dict[tuple[str, int], int] = defaultdict(lambda: -1)
        for e in log:
            if e[0] == "seen":
                first.setdefault(e[2], e)
            elif e[0] == "committed":
                last_commit[e[1], e[3]] = max(last_commit[e[1], e[3]], e[4])
        redelivered = [v for v, n in seen.items() if n > 1]
        for v in redelivered:
            _, who, _, partition, offset = first[v]
            assert who in churn.killed and offset >= last_commit[who, partition], first[v]
        # No partition revoked from a member and handed straight back to it.
        last_revoked: dict[str, set[int]] = {}
        for e in log:
            if e[0] == "revoke":
                last_revoked[e[1]] = set(e[2])
            elif e[0] == "assign":
                assert not last_revoked.pop(e[1], set()) & set(e[2]), e
        print(f"churn: {churn.n} consumers, {len(churn.killed)} SIGKILLed, {total} records, "
              f"{len(redelivered)} redelivered after a SIGKILL")
    finally:
        for proc, _ in churn.live.values():
            os.kill(proc.pid, signal.SIGKILL)
        bp.cleanup()
