# Log compaction, kafkalite against the real Kafka 3.8: the same keyed workload (updates and
# tombstones, small segment.bytes and segment.ms, a low dirty ratio, a short
# delete.retention.ms) goes into a compacted topic on each broker; once both cleaners have
# run, a read from the beginning gives the same (offset, key, value) list on both: the latest
# record of each key with its original offset (gaps where the rest was), tombstones first
# kept, then gone after delete.retention.ms.
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import create_topic, private_kafka

KEYS = 150
ROUNDS = 3
DELETED = range(0, KEYS, 10)  # tombstoned in the last round
DELETE_RETENTION_MS = 6000
SEGMENT_MS = 1000
BROKER = {"log.cleaner.backoff.ms": "200"}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "8192",
                 "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
                 "delete.retention.ms": str(DELETE_RETENTION_MS)}

Rec = tuple[int, bytes, "bytes | None"]


def produce(bootstrap: str, topic: str, rounds: range, roll: bytes) -> list[Rec]:
    """The workload; returns every record with the offset the broker gave it."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 40,
                  "enable.idempotence": False})
    acked: list[Rec] = []

    def on_delivery(err, msg):
        assert err is None, err
        acked.append((msg.offset(), msg.key(), msg.value()))

    def send(key: bytes, value: bytes | None) -> None:
        p.produce(topic, value, key, on_delivery=on_delivery)
        p.poll(0)

    for r in rounds:
        for k in range(KEYS):
            gone = r == ROUNDS - 1 and k in DELETED
            if r < ROUNDS or k not in DELETED:
                send(b"key-%d" % k, None if gone else b"value-%d-%d" % (k, r))
    assert p.flush(30) == 0
    # segment.ms has passed: the next append rolls the segment holding the workload, so all
    # of it is below the active segment (cleanable)
    time.sleep(SEGMENT_MS / 1000 + 0.5)
    send(roll, roll)
    assert p.flush(30) == 0
    return sorted(acked)


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Rec]:
    """Every record a consumer from the beginning reads, up to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": isolation})
    try:
        tp = TopicPartition(topic, 0)
        _low, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[Rec] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append((m.offset(), m.key(), m.value()))
            if c.position([tp])[0].offset >= high:  # markers are never delivered
                break
        return out
    finally:
        c.close()


def poll_until(bootstrap: str, topic: str, done, timeout: float,
               isolation: str = "read_uncommitted") -> list[Rec]:
    """Read from the beginning again and again (bounded) until `done(records)`."""
    deadline = time.monotonic() + timeout
    got = read_all(bootstrap, topic, isolation)
    while not done(got) and time.monotonic() < deadline:
        time.sleep(0.5)
        got = read_all(bootstrap, topic, isolation)
    return got


def latest_view(recs: list[Rec]) -> dict[bytes, Rec]:
    view: dict[bytes, Rec] = {}
    for rec in recs:
        view[rec[1]] = rec
    return view


def run(bootstrap: str) -> dict[str, object]:
    topic = "compact-diff-" + uuid.uuid4().hex[:8]
    create_topic(bootstrap, topic, TOPIC_CONFIGS)
    produced = produce(bootstrap, topic, range(ROUNDS), b"roll-1")
    latest = latest_view(produced)
    roll_offset = latest[b"roll-1"][0]
    superseded = lambda got: [r for r in got if r[0] < roll_offset  # noqa: E731
                              and latest[r[1]] != r]
    cleaned = poll_until(bootstrap, topic, lambda got: not superseded(got), 60)
    seen_clean = time.monotonic()
    result = {"expected": sorted(latest.values()), "cleaned": cleaned,
              "superseded": superseded(cleaned)}
    # Kafka removes a tombstone in a cleaning after its delete horizon (set by the cleaning
    # that first kept it); only new dirty data starts one: another round of updates
    time.sleep(max(0.0, seen_clean + DELETE_RETENTION_MS / 1000 - time.monotonic()) + 0.5)
    produced += produce(bootstrap, topic, range(ROUNDS, ROUNDS + 1), b"roll-2")
    final = latest_view(produced)
    result["final"] = sorted(r for r in final.values() if r[2] is not None)
    result["gone"] = poll_until(bootstrap, topic, lambda got: got == result["final"], 60)
    result["produced"] = produced
    return result


def check(result: dict) -> None:
    produced, cleaned, gone = result["produced"], result["cleaned"], result["gone"]
    assert result["superseded"] == []  # superseded values below the cleaned point are gone
    assert set(cleaned) <= set(produced)  # every record kept at the offset it was given
    # the latest-per-key view is the workload's; tombstones kept (before their horizon)
    assert [r for r in cleaned if r[1] != b"roll-1"] == \
        [r for r in result["expected"] if r[1] != b"roll-1"]
    assert gone == result["final"]  # tombstones removed after delete.retention.ms
    offsets = [r[0] for r in gone]
    assert offsets == sorted(set(offsets)) and offsets[-1] == max(r[0] for r in produced)
    assert set(gone) <= set(produced) and len(gone) < offsets[-1] + 1  # offsets kept, gaps


def run_on_both(tmp_path_factory, workload) -> dict[str, dict]:
    """workload(bootstrap) on a kafkalite and on a real Kafka of its own, one after the
    other (the machine is small), both with BROKER's properties."""
    out = {}
    bp = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("lite")), settings=BROKER)
    bp.start()
    try:
        out["kafkalite"] = workload(bp.bootstrap)
    finally:
        bp.cleanup()
    with private_kafka(BROKER) as bootstrap:
        out["kafka"] = workload(bootstrap)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    return run_on_both(tmp_path_factory, run)


@pytest.mark.parametrize("broker", ["kafkalite", "kafka"])
def test_compaction_result(results, broker):
    check(results[broker])


def test_same_compacted_log_on_both(results):
    lite, kafka = results["kafkalite"], results["kafka"]
    assert lite["produced"] == kafka["produced"]  # same workload, same offsets
    assert lite["cleaned"] == kafka["cleaned"]
    assert lite["gone"] == kafka["gone"]
