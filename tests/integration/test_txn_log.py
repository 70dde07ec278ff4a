# The log side of transactions, against kafkalite and the real Kafka 3.8 (any_broker): a
# confluent-kafka transactional producer writes, raw Fetch/ListOffsets/DescribeProducers
# requests look at the log (LSO, control batches, aborted_transactions), and a confluent-kafka
# read_committed consumer shows what applications see.
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.helpers.kbatch import batch_headers, call, connect, decode_records
from tests.helpers.real_kafka import create_topic, eventually
from tests.integration.test_txn_coordinator_wire import Wire

CONTROL = 0x20
TIMEOUT = 30.0


def fetch(bootstrap: str, topic: str, offset: int, committed: bool, partition: int = 0):
    """One sessionless Fetch v12 at the given isolation level; the partition's answer."""
    from kafka.protocol.consumer import FetchRequest
    Req = FetchRequest[12]
    T = Req.FetchTopic
    req = Req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
              isolation_level=1 if committed else 0, session_id=0, session_epoch=-1,
              forgotten_topics_data=[], rack_id="", topics=[T(topic=topic, partitions=[
                  T.FetchPartition(partition=partition, fetch_offset=offset,
                                   partition_max_bytes=1 << 20, current_leader_epoch=-1,
                                   log_start_offset=-1)])])
    with connect(bootstrap) as s:
        return call(s, req).responses[0].partitions[0]


def latest(bootstrap: str, topic: str, committed: bool) -> int:
    w = Wire(bootstrap)
    try:
        m = w.mod(2, 5)
        r = w.call(2, 5, replica_id=-1, isolation_level=1 if committed else 0, topics=(
            m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
        part = r.topics[0].partitions[0]
        assert part.error_code == 0
        return part.offset
    finally:
        w.close()


def txn_start(bootstrap: str, topic: str) -> dict[int, int]:
    """DescribeProducers: producer id -> current_txn_start_offset."""
    w = Wire(bootstrap)
    try:
        m = w.mod(61, 0)
        r = w.call(61, 0, topics=(m.TopicRequest(name=topic, partition_indexes=(0,)),))
        return {p.producer_id: p.current_txn_start_offset
                for p in r.topics[0].partitions[0].active_producers}
    finally:
        w.close()


def txn_producer(bootstrap: str, txn: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn,
                  "linger.ms": 0, **extra})
    p.init_transactions(TIMEOUT)
    return p


def send(p: Producer, topic: str, values: list[bytes]) -> None:
    failed: list = []
    for v in values:
        p.produce(topic, v, partition=0,
                  on_delivery=lambda err, _msg: err is not None and failed.append(err))
    assert p.flush(TIMEOUT) == 0
    assert failed == []


def read_committed(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes]]:
    """What a confluent-kafka read_committed consumer sees of offsets below `end`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        for _ in range(100):  # bounded: at most ~100 polls of 0.2 s
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append((m.offset(), m.value()))
            pos = c.position([TopicPartition(topic, 0)])[0].offset
            if pos >= end:
                break
        return out
    finally:
        c.close()


@pytest.fixture
def topic(any_broker) -> str:
    name = f"txl-{uuid.uuid4().hex[:8]}"
    create_topic(any_broker, name)
    return name


def test_lso_control_batches_and_aborted_transactions(any_broker, topic):
    b = any_broker
    plain = Producer({"bootstrap.servers": b, "linger.ms": 0})
    send(plain, topic, [b"p0", b"p1", b"p2"])
    p = txn_producer(b, f"tx-{topic}")
    p.begin_transaction()
    send(p, topic, [b"c3", b"c4"])
    # An open transaction: read_committed stops at its first offset; uncommitted sees it.
    r = fetch(b, topic, 0, committed=True)
    assert (r.high_watermark, r.last_stable_offset, r.aborted_transactions) == (5, 3, [])
    assert [o for o, *_ in decode_records(r.records)] == [0, 1, 2]
    r = fetch(b, topic, 0, committed=False)
    assert (r.high_watermark, r.last_stable_offset, r.aborted_transactions) == (5, 3, None)
    assert len(decode_records(r.records)) == 5
    assert (latest(b, topic, True), latest(b, topic, False)) == (3, 5)
    [(pid, start)] = txn_start(b, topic).items()
    assert start == 3
    assert fetch(b, topic, 3, committed=True).records in (b"", None)
    p.commit_transaction(TIMEOUT)
    # The COMMIT marker at 5: the LSO moves past it, the marker is a control batch.
    r = eventually(lambda: fetch(b, topic, 0, committed=True),
                   lambda r: r.last_stable_offset == 6)
    assert (r.high_watermark, r.last_stable_offset, r.aborted_transactions) == (6, 6, [])
    heads = batch_headers(r.records)
    assert [(h.base_offset, bool(h.attributes & CONTROL), h.producer_id) for h in heads][-1] \
        == (5, True, pid)
    assert txn_start(b, topic)[pid] == -1
    # An aborted transaction: listed for read_committed, its records dropped by the client.
    p.begin_transaction()
    send(p, topic, [b"a6", b"a7"])
    p.abort_transaction(TIMEOUT)
    r = eventually(lambda: fetch(b, topic, 0, committed=True),
                   lambda r: r.last_stable_offset == 9)
    assert [(a.producer_id, a.first_offset) for a in r.aborted_transactions] == [(pid, 6)]
    assert [(h.base_offset, bool(h.attributes & CONTROL)) for h in batch_headers(r.records)][-2:] \
        == [(6, False), (8, True)]
    assert fetch(b, topic, 9, committed=True).aborted_transactions == []
    assert [(a.producer_id, a.first_offset)
            for a in fetch(b, topic, 8, committed=True).aborted_transactions] == [(pid, 6)]
    # Uncommitted: data of both transactions and both markers, as control batches.
    r = fetch(b, topic, 0, committed=False)
    assert r.aborted_transactions is None
    assert [h.base_offset for h in batch_headers(r.records)
            if h.attributes & CONTROL] == [5, 8]
    p.begin_transaction()
    send(p, topic, [b"c10"])
    p.commit_transaction(TIMEOUT)
    assert read_committed(b, topic, 11) == [(0, b"p0"), (1, b"p1"), (2, b"p2"), (3, b"c3"),
                                            (4, b"c4"), (9, b"c10")]


def test_transactional_batch_for_a_partition_not_in_the_transaction(any_broker, topic):
    """KIP-890 part 1: the broker asks the coordinator; the raw answer is Kafka's."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from tests.integration.test_txn_coordinator_wire import find_txn_coordinator, init_ok

    w = Wire(any_broker)
    try:
        txn = f"tx-{topic}"
        find_txn_coordinator(w, txn)
        pid, epoch = init_ok(w, txn)

        def batch(seq: int, transactional: bool = True) -> bytes:
            bb = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                           is_transactional=transactional, producer_id=pid,
                                           producer_epoch=epoch, base_sequence=seq,
                                           batch_size=1 << 20)
            bb.append(0, timestamp=1_700_000_000_000, key=None, value=b"v", headers=[])
            return bytes(bb.build())

        def produce(s, records: bytes, txn_id: str | None = txn) -> int:
            from kafka.protocol.producer import ProduceRequest
            Req = ProduceRequest[9]
            T = Req.TopicProduceData
            req = Req(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
                T(name=topic, partition_data=[T.PartitionProduceData(index=0,
                                                                     records=records)])])
            # Kafka answers NOT_LEADER_OR_FOLLOWER until a new topic's leadership reaches
            # its metadata cache: retried, bounded, as a client does.
            deadline = time.monotonic() + 20
            while True:
                code = call(s, req).responses[0].partition_responses[0].error_code
                if code not in (3, 6) or time.monotonic() > deadline:
                    return code
                time.sleep(0.1)

        with connect(any_broker) as s:
            assert produce(s, batch(0), None) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert produce(s, batch(0)) == 48  # INVALID_TXN_STATE
            assert w.add(txn, pid, epoch, {topic: [0]}).results_by_topic_v3_and_below[0] \
                .results_by_partition[0].partition_error_code == 0
            assert produce(s, batch(0)) == 0
            # A non-transactional batch from the same producer while its transaction is open.
            assert produce(s, batch(1, transactional=False)) == 48
            assert produce(s, batch(1)) == 0
        assert txn_start(any_broker, topic) == {pid: 0}
    finally:
        w.close()
