# The broker SIGKILLed at random points while the log cleaner works. A compacted topic with
# small segments receives, round after round, keyed updates and tombstones of known content
# from a confluent-kafka producer (every record acknowledged before the kill); the cleaner
# (log.cleaner.backoff.ms small, its I/O throttled so that a cleaning lasts a while) starts on
# each round, and the broker is killed after a random delay. The data directory is then
# inspected (how many kills found `.cleaned` / `.swap` files: kills that landed inside a
# swap), and the broker restarted with its cleaner off, so that what is checked is what
# recovery left, not something a new cleaning repaired:
#   - no `.cleaned` or `.swap` file is left in the partition's directory;
#   - the partition reads from its log start offset to its high watermark, offsets
#     increasing;
#   - every key's latest value is there, and no key whose latest record is a tombstone
#     shows a value (a deleted key never comes back).
# Then the cleaner is switched back on for the next round. Bounded in CI (5 kills); 100
# behind KAFKALITE_LONG=1.
from __future__ import annotations

import os
import random
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

KEYS = 400
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "16384",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "300",  # tombstones go too: their removal must not revive a key
    "file.delete.delay.ms": "100",
}
SETTINGS = {
    "log.cleaner.backoff.ms": "50",
    # a cleaning of the growing log takes a noticeable time, so that kills land inside it
    "log.cleaner.io.max.bytes.per.second": "2000000",
}


def produce_round(bootstrap: str, topic: str, rnd: random.Random, r: int,
                  latest: dict[bytes, bytes | None]) -> None:
    """One round: every key updated or (one in six) deleted; `latest` follows what was
    acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50,
                  "enable.idempotence": True, "log_level": 0})
    failed: list[str] = []

    def acked(err, msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            latest[msg.key()] = msg.value()

    for k in rnd.sample(range(KEYS), KEYS):
        key = b"key-%d" % k
        value = None if rnd.random() < 1 / 6 else b"value-%d-%d-" % (k, r) + b"x" * 60
        p.produce(topic, value, key, partition=0, on_delivery=acked)
        p.poll(0)
    assert p.flush(60) == 0
    assert not failed, failed[:3]


def read_from_start(bootstrap: str, topic: str) -> tuple[list[int], dict[bytes, bytes | None]]:
    """Every record from the log start offset to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "log_level": 0})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)
        c.assign([TopicPartition(topic, 0, low)])
        offsets: list[int] = []
        seen: dict[bytes, bytes | None] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error():
                    continue
                offsets.append(m.offset())
                seen[m.key()] = m.value()
            pos = c.position([TopicPartition(topic, 0)])[0].offset
            if pos >= high:
                break
        assert pos >= high, f"read stopped at {pos}, high watermark {high}"
        return offsets, seen
    finally:
        c.close()


def leftovers(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap")))


def run_kills(tmp_path, kills: int, seed: int) -> dict[str, int]:
    rnd = random.Random(seed)
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=dict(SETTINGS))
    topic = "cleaner-crash"
    pdir = os.path.join(bp.data_dir, f"{topic}-0")
    latest: dict[bytes, bytes | None] = {}
    produced = 0
    in_swap = 0
    bp.start()
    try:
        admin = AdminClient({"bootstrap.servers": bp.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIGS)])[topic].result(20)
        del admin  # its connections would only log the kills
        for r in range(kills):
            produce_round(bp.bootstrap, topic, rnd, r, latest)
            produced += KEYS
            time.sleep(rnd.uniform(0, 1.5))
            bp.kill()
            in_swap += bool(leftovers(pdir))
            bp.settings["log.cleaner.enable"] = "false"
            bp.start(timeout=60)
            assert leftovers(pdir) == [], f"kill {r}: recovery left {leftovers(pdir)}"
            offsets, seen = read_from_start(bp.bootstrap, topic)
            assert offsets == sorted(set(offsets)), f"kill {r}: offsets out of order"
            for key, value in latest.items():
                if value is None:
                    assert seen.get(key) is None, f"kill {r}: deleted {key!r} came back"
                else:
                    assert seen.get(key) == value, f"kill {r}: latest value of {key!r} lost"
            assert set(seen) <= set(latest)
            bp.stop()
            bp.settings["log.cleaner.enable"] = "true"
            bp.start(timeout=60)
        cleanings = bp.read_log().count("Cleaned cleaner-crash-0")
        remaining = len(offsets)
    finally:
        bp.cleanup()
    # the cleaner did run (the checks above are not about an uncleaned log)
    assert cleanings > 0 and remaining < produced
    return {"kills": kills, "kills_during_swap": in_swap, "cleanings": cleanings,
            "records_produced": produced, "records_left": remaining}


def test_sigkill_during_cleaning_loses_nothing(tmp_path):
    seed = int(os.environ.get("KAFKALITE_SEED", random.randrange(1 << 30)))
    print("seed", seed, run_kills(tmp_path, kills=5, seed=seed))


@pytest.mark.long
@pytest.mark.timeout(1800)  # about 5 s a kill, past the suite's 300 s
def test_sigkill_during_cleaning_100_times(tmp_path):
    seed = int(os.environ.get("KAFKALITE_SEED", random.randrange(1 << 30)))
    print("seed", seed, run_kills(tmp_path, kills=100, seed=seed))
