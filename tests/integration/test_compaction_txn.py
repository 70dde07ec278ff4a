# Transactions under the log cleaner, kafkalite against the real Kafka 3.8: a confluent-kafka
# transactional producer commits, aborts and commits again into a compacted topic. After
# cleaning, aborted records are gone (read_uncommitted no longer sees them), read_committed
# consumers see the same latest value per key as before cleaning, and the transaction
# markers left in the log (Kafka's rules: an ABORT marker stays while its data is in the log,
# then until its delete horizon; a COMMIT marker until its transaction's data is all gone,
# then the same) are the same on both brokers, cleaning after cleaning.
from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import Producer
from kafka.record.default_records import DefaultRecordBatch

from tests.helpers.kbatch import batch_headers, connect, fetch_raw
from tests.helpers.real_kafka import create_topic
from tests.integration.test_compaction_vs_kafka import (BROKER, DELETE_RETENTION_MS,
                                                        SEGMENT_MS, TOPIC_CONFIGS, Rec,
                                                        latest_view, poll_until, read_all,
                                                        run_on_both)

KEYS = 40
CONTROL_BIT = 0x20


class Txns:
    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                           "transactional.id": "compact-txn-" + uuid.uuid4().hex[:8]})
        self.p.init_transactions(30)
        self.committed: list[Rec] = []
        self.aborted: list[Rec] = []

    def txn(self, records: list[tuple[bytes, bytes]], commit: bool = True) -> None:
        acked: list[Rec] = []

        def on_delivery(err, msg):
            assert err is None, err
            acked.append((msg.offset(), msg.key(), msg.value()))

        self.p.begin_transaction()
        for k, v in records:
            self.p.produce(self.topic, v, k, on_delivery=on_delivery)
        self.p.flush(30)
        if commit:
            self.p.commit_transaction(30)
            self.committed += acked
        else:
            self.p.abort_transaction(30)
            self.aborted += acked

    def roll(self, name: bytes) -> int:
        """A committed record after segment.ms: everything before it can be cleaned."""
        time.sleep(SEGMENT_MS / 1000 + 0.5)
        self.txn([(name, name)])
        return self.committed[-1][0]


def markers(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """(offset, type) of every control record in the log: 0 ABORT, 1 COMMIT (raw Fetch)."""
    out = []
    with connect(bootstrap) as s:
        offset = 0
        for _ in range(200):
            part = fetch_raw(s, topic, 0, offset)
            data = bytes(part.records or b"")
            heads = batch_headers(data)
            if not heads:
                break
            pos = 0
            for h in heads:
                if h.attributes & CONTROL_BIT:
                    for r in DefaultRecordBatch(data[pos:pos + h.size]):
                        out.append((r.offset, struct.unpack(">hh", r.key)[1]))
                pos += h.size
                offset = h.last_offset + 1
            if offset >= part.high_watermark:
                break
    return out


def committed_view(recs: list[Rec]) -> dict:
    return {k: v for k, (_o, _k, v) in latest_view(recs).items()}


def run(bootstrap: str) -> dict:
    topic = "compact-txn-" + uuid.uuid4().hex[:8]
    create_topic(bootstrap, topic, TOPIC_CONFIGS)
    t = Txns(bootstrap, topic)
    t.txn([(b"k%d" % k, b"c1") for k in range(KEYS)])
    t.txn([(b"k%d" % k, b"aborted") for k in range(KEYS)], commit=False)
    t.txn([(b"k%d" % k, b"c2") for k in range(KEYS // 2)])
    roll = t.roll(b"roll-1")
    out: dict = {"committed": sorted(t.committed)}
    out["rc_before"] = committed_view(read_all(bootstrap, topic, "read_committed"))
    latest = latest_view(t.committed)

    def clean_below(roll_offset: int):
        latest = latest_view(t.committed)
        return lambda got: not [r for r in got if r[0] < roll_offset and latest[r[1]] != r]

    out["uncommitted"] = poll_until(bootstrap, topic, clean_below(roll), 60)
    out["rc_after"] = read_all(bootstrap, topic, "read_committed")
    out["expected"] = sorted(latest.values())
    out["markers"] = [markers(bootstrap, topic)]
    # two more cleanings, each one delete.retention.ms after the last, started by new dirt
    for n in (2, 3):
        time.sleep(DELETE_RETENTION_MS / 1000 + 0.5)
        t.txn([(b"k%d" % k, b"c%d" % (n + 1)) for k in range(5)])
        roll = t.roll(b"roll-%d" % n)
        poll_until(bootstrap, topic, clean_below(roll), 60)
        out["markers"].append(markers(bootstrap, topic))
    out["rc_final"] = read_all(bootstrap, topic, "read_committed")
    out["final"] = sorted(latest_view(t.committed).values())
    t.p.flush(5)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    return run_on_both(tmp_path_factory, run)


@pytest.mark.parametrize("broker", ["kafkalite", "kafka"])
def test_aborted_records_removed_committed_view_unchanged(results, broker):
    r = results[broker]
    assert not [x for x in r["uncommitted"] if x[2] == b"aborted"]  # aborted data removed
    assert r["uncommitted"] == r["expected"]  # read_uncommitted: latest committed per key
    assert committed_view(r["rc_after"]) == r["rc_before"] == committed_view(r["committed"])
    assert r["rc_after"] == r["expected"] and r["rc_final"] == r["final"]


def test_same_markers_on_both(results):
    lite, kafka = results["kafkalite"], results["kafka"]
    assert lite["committed"] == kafka["committed"]  # same offsets
    assert lite["markers"] == kafka["markers"]
    # the ABORT marker outlives its data by delete.retention.ms, then goes
    aborts = [[m for m in ms if m[1] == 0] for ms in lite["markers"]]
    assert aborts[0] and aborts[-1] == []
