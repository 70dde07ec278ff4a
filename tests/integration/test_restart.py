# Restarts of a broker subprocess, clean (SIGTERM) and hard (kill -9): records, offsets,
# timestamps and idempotent-producer state survive; a torn tail is cut off on restart.
from __future__ import annotations

import glob
import os

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import InitProducerIdRequest

from tests.integration.test_core_roundtrip import dataset, expected_by_partition
from tests.helpers.kbatch import (call, connect, decode_records, fetch_raw, produce_raw,
                               simple_batch)
from tests.helpers.kclients import consume, produce


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    Req = ListOffsetsRequest[7]
    T = Req.ListOffsetsTopic
    with connect(bootstrap) as s:
        r = call(s, Req(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
            T.ListOffsetsPartition(partition_index=p, timestamp=-1, current_leader_epoch=-1)
            for p in range(partitions)])]))
    return [p.offset for p in r.topics[0].partitions]


def test_records_survive_clean_and_hard_restarts(broker_process):
    bp = broker_process
    topic = create_topic(bp.bootstrap, "survivor", 3)
    records = dataset()
    produce("confluent", bp.bootstrap, topic, records, codec="zstd", idempotent=True)
    counts = {p: sum(1 for r in records if r[0] == p) for p in range(3)}
    before = consume("kafka-python", bp.bootstrap, topic, counts)
    want = expected_by_partition(records)
    assert {p: [(k, v, h) for _p, _o, k, v, h, _t, _ts in rs] for p, rs in before.items()} \
        == want
    for hard in (False, True):
        bp.restart(hard=hard)
        if not hard:
            assert "Shutdown complete" in bp.read_log()
        assert end_offsets(bp.bootstrap, topic, 3) == [counts[p] for p in range(3)]
        after = consume("confluent" if hard else "aiokafka", bp.bootstrap, topic, counts)
        assert after == before  # offsets, keys, values, headers and timestamps
    # Appends continue at the old end offsets.
    acked = produce("kafka-python", bp.bootstrap, topic,
                    [(p, b"late", b"after-restarts", [], None) for p in range(3)])
    assert acked == [(p, counts[p]) for p in range(3)]


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_idempotent_producer_state_survives_restart(broker_process, hard):
    bp = broker_process
    topic = create_topic(bp.bootstrap, "idem", 1)
    with connect(bp.bootstrap) as s:
        r = call(s, InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=100,
                                             producer_id=-1, producer_epoch=-1))
        pid, epoch = r.producer_id, r.producer_epoch
        batches = [simple_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                tag=b"s%d" % seq) for seq, n in ((0, 2), (2, 3), (5, 1))]
        assert [produce_raw(s, topic, 0, b).base_offset for b in batches] == [0, 2, 5]
    bp.restart(hard=hard)
    with connect(bp.bootstrap) as s:
        # A retried batch is recognised as a duplicate and answered with its first offset when
        # the state has it: after a crash the unsnapshotted tail is replayed (all five cached
        # batches); a clean shutdown's snapshot keeps each producer's last batch only, and an
        # older retry is OUT_OF_ORDER_SEQUENCE_NUMBER, as Apache Kafka 3.8 answers.
        want = [(0, 0), (0, 2), (0, 5)] if hard else [(45, -1), (45, -1), (0, 5)]
        got = [produce_raw(s, topic, 0, b) for b in batches]
        assert [(r.error_code, r.base_offset) for r in got] == want
        assert fetch_raw(s, topic, 0, 0).high_watermark == 6
        gap = simple_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=9)
        assert produce_raw(s, topic, 0, gap).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = simple_batch(2, producer_id=pid, producer_epoch=epoch, base_sequence=6)
        assert produce_raw(s, topic, 0, nxt).base_offset == 6
        values = [r[3] for r in decode_records(bytes(fetch_raw(s, topic, 0, 0).records))]
        assert len(values) == 8
        # Producer ids are never handed out twice, even across a crash.
        r = call(s, InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=100,
                                             producer_id=-1, producer_epoch=-1))
        assert r.error_code == 0 and r.producer_id > pid
    # A real idempotent producer keeps working after the restart.
    acked = produce("confluent", bp.bootstrap, topic, [(0, b"k", b"v", [], None)] * 3,
                    idempotent=True)
    assert acked == [(0, 8), (0, 9), (0, 10)]


def test_torn_tail_is_truncated_after_kill(broker_process):
    bp = broker_process
    topic = create_topic(bp.bootstrap, "torn", 1)
    records = [(0, b"k%d" % i, b"v%d" % i * 30, [("i", b"%d" % i)], None) for i in range(500)]
    produce("confluent", bp.bootstrap, topic, records, codec="lz4")
    before = consume("confluent", bp.bootstrap, topic, {0: 500})
    bp.kill()
    [seg] = glob.glob(os.path.join(bp.data_dir, f"{topic}-0", "*.log"))
    size = os.path.getsize(seg)
    with open(seg, "ab") as f:  # the start of a batch whose write never finished
        f.write(simple_batch(3)[:40])
    bp.start()
    assert "truncated 40 bytes" in bp.read_log()
    assert os.path.getsize(seg) == size
    assert consume("kafka-python", bp.bootstrap, topic, {0: 500}) == before
    assert produce("kafka-python", bp.bootstrap, topic, [(0, b"x", b"y", [], None)]) == [(0, 500)]


def test_idempotent_producer_retries_across_a_crash(broker_process):
    """The broker is killed while an idempotent producer has batches in flight and comes
    back; the producer retries them with the same sequence numbers, and the broker, with
    its producer state rebuilt from the log, keeps exactly one copy of each record."""
    import time

    import confluent_kafka as ck
    bp = broker_process
    topic = create_topic(bp.bootstrap, "retried", 3)
    errors: list = []
    p = ck.Producer({"bootstrap.servers": bp.bootstrap, "enable.idempotence": True,
                     "linger.ms": 2, "batch.num.messages": 200, "message.timeout.ms": 60_000,
                     "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500})
    n = 6000
    cb = lambda err, msg: errors.append(err) if err else None  # noqa: E731
    for i in range(n):
        if i == n // 2:
            p.poll(0)
            bp.kill()       # batches are in flight: some appended, none or some acked
            bp.start()
        p.produce(topic, value=b"%06d" % i, key=b"%d" % (i % 3), partition=i % 3,
                  on_delivery=cb)
        if i % 500 == 0:
            p.poll(0)
    deadline = time.monotonic() + 60
    while len(p) and time.monotonic() < deadline:
        p.flush(1)
    assert len(p) == 0 and errors == []
    counts = {q: n // 3 for q in range(3)}
    got = consume("confluent", bp.bootstrap, topic, counts, timeout=60)
    for q in range(3):
        assert [r[3] for r in got[q]] == [b"%06d" % i for i in range(q, n, 3)], q
    assert end_offsets(bp.bootstrap, topic, 3) == [n // 3] * 3  # no duplicates
