# Log compaction end to end: confluent-kafka produces keyed updates into a compacted topic
# with small segments, kafkalite's cleaner compacts it, and a consumer from the beginning
# reads the latest value of each key; a SIGKILL during cleaning loses nothing.
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

KEYS = 1000
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "16384",
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"}


def produce_rounds(bootstrap: str, topic: str, rounds: range) -> dict[bytes, bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    latest = {}
    for r in rounds:
        for k in range(KEYS):
            key, value = b"key-%d" % k, b"value-%d-%d" % (k, r)
            p.produce(topic, value, key)
            latest[key] = value
            p.poll(0)
    assert p.flush(30) == 0
    return latest


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[tuple[int, bytes, bytes]] = []
    idle = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and idle < 6:
        m = c.poll(0.5)
        if m is None:
            idle += 1 if out else 0
            continue
        if m.error():
            continue
        idle = 0
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def wait_compacted(bootstrap: str, topic: str, latest: dict, below: int) -> list:
    deadline = time.monotonic() + 60
    while True:
        got = read_all(bootstrap, topic)
        if len(got) < below or time.monotonic() > deadline:
            return got
        time.sleep(1)


def check(got: list, latest: dict) -> None:
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))  # increasing, with gaps
    seen = {}
    for _o, k, v in got:
        seen[k] = v
    assert seen == latest  # every key's latest value, none lost


@pytest.fixture
def broker(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"),
                       settings={"log.cleaner.backoff.ms": "200"})
    bp.start()
    try:
        yield bp
    finally:
        bp.cleanup()


def test_compacted_topic_keeps_latest_value_per_key_and_survives_sigkill(broker):
    topic = "compacted-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=CONFIGS)])[topic].result(20)
    latest = produce_rounds(broker.bootstrap, topic, range(3))
    got = wait_compacted(broker.bootstrap, topic, latest, below=2 * KEYS)
    check(got, latest)
    assert len(got) < 2 * KEYS  # the cleaner ran: superseded values are gone
    # SIGKILL while the cleaner works on a new round, then restart: nothing is lost
    latest = produce_rounds(broker.bootstrap, topic, range(3, 5))
    time.sleep(0.3)
    broker.kill()
    broker.start()
    check(read_all(broker.bootstrap, topic), latest)
    got = wait_compacted(broker.bootstrap, topic, latest, below=2 * KEYS)
    check(got, latest)
