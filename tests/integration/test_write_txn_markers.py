# WriteTxnMarkers (27) as the admin client's abortTransaction sends it, against kafkalite and
# the real Kafka 3.8 (any_broker): a hanging transaction (a raw transactional Produce, never
# ended) holds the LSO back; an ABORT marker with the producer id/epoch and coordinator epoch
# DescribeProducers shows ends it there, the LSO moves and a read_committed consumer passes
# it. Refusals per partition are Kafka's: unknown partitions, an older producer epoch, a
# coordinator epoch older than the partition's last marker.
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode as E

from tests.helpers.kbatch import call, connect
from tests.helpers.real_kafka import create_topic, eventually
from tests.integration.test_txn_coordinator_wire import Wire, find_txn_coordinator, init_ok
from tests.integration.test_txn_log import fetch, latest, read_committed, send



def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    """Records stamped 10 minutes ago: old enough for find-hanging's candidates, young enough
    for retention (a 2023 stamp lets retention delete the segment, moving the log start)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    ts = int(time.time() * 1000) - 600_000
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                   batch_size=1 << 20)
    for i, v in enumerate(values):
        bb.append(i, timestamp=ts, key=None, value=v, headers=[])
    return bytes(bb.build())


def produce(bootstrap: str, txn: str, topic: str, records: bytes) -> int:
    """A transactional Produce v9 of one batch into partition 0; its error code. Kafka answers
    NOT_LEADER_OR_FOLLOWER until a new topic's leadership reaches its metadata cache:
    retried, bounded, as a client does."""
    from kafka.protocol.producer import ProduceRequest
    Req = ProduceRequest[9]
    T = Req.TopicProduceData
    req = Req(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])
    with connect(bootstrap) as s:
        return eventually(lambda: call(s, req).responses[0].partition_responses[0].error_code,
                          lambda code: code not in (3, 6), timeout=20)


def producers(w: Wire, topic: str) -> dict[int, tuple[int, int, int]]:
    """DescribeProducers of partition 0: pid -> (epoch, coordinator epoch, txn start)."""
    m = w.mod(61, 0)
    r = w.call(61, 0, topics=(m.TopicRequest(name=topic, partition_indexes=(0,)),))
    return {p.producer_id: (p.producer_epoch, p.coordinator_epoch, p.current_txn_start_offset)
            for p in r.topics[0].partitions[0].active_producers}


def write_markers(w: Wire, pid: int, epoch: int, coordinator_epoch: int,
                  parts: dict[str, list[int]], commit: bool = False) -> dict:
    """One WriteTxnMarkers v1 marker; (topic, partition) -> error code."""
    m = w.mod(27, 1)
    r = w.call(27, 1, markers=(m.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=tuple(m.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(p))
                     for t, p in parts.items())),))
    assert [x.producer_id for x in r.markers] == [pid]
    return {(t.name, p.partition_index): p.error_code
            for t in r.markers[0].topics for p in t.partitions}


@pytest.fixture
def hanging(any_broker):
    """(bootstrap, wire, txn id, topic, pid, epoch): records 0-1 of the topic are a
    transaction the producer never ends; epoch 1 (initialised twice)."""
    topic = f"wtm-{uuid.uuid4().hex[:8]}"
    txn = f"tx-{topic}"
    create_topic(any_broker, topic)
    w = Wire(any_broker)
    try:
        find_txn_coordinator(w, txn)
        init_ok(w, txn)
        pid, epoch = init_ok(w, txn)
        assert epoch == 1
        add = w.add(txn, pid, epoch, {topic: [0]})
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == E.none
        assert produce(any_broker, txn, topic, txn_batch(pid, epoch, 0, [b"t0", b"t1"])) == 0
        yield any_broker, w, txn, topic, pid, epoch
    finally:
        w.close()


def test_abort_of_a_hanging_transaction_moves_the_lso(hanging):
    b, w, txn, topic, pid, epoch = hanging
    plain = Producer({"bootstrap.servers": b, "linger.ms": 0})
    send(plain, topic, [b"p2"])
    assert latest(b, topic, committed=True) == 0
    assert producers(w, topic)[pid] == (epoch, -1, 0)
    # Refused, each for its partition only, nothing written.
    other = f"wtm-none-{uuid.uuid4().hex[:6]}"
    assert write_markers(w, pid, epoch, -1, {topic: [0, 7], other: [0]}) == {
        (topic, 0): E.none, (topic, 7): E.unknown_topic_or_partition,
        (other, 0): E.unknown_topic_or_partition}
    assert latest(b, topic, committed=True) == 4
    assert producers(w, topic)[pid] == (epoch, -1, -1)
    r = fetch(b, topic, 0, committed=True)
    assert (r.high_watermark, r.last_stable_offset) == (4, 4)
    assert [(a.producer_id, a.first_offset) for a in r.aborted_transactions] == [(pid, 0)]
    assert read_committed(b, topic, 4) == [(2, b"p2")]
    # The coordinator was not told: the producer's commit ends the coordinator's transaction
    # with a marker that finds nothing open in the partition; the aborted records stay so.
    assert w.end(txn, pid, epoch, True) == E.none
    end = eventually(lambda: latest(b, topic, committed=True), lambda o: o == 5)
    assert end == 5
    assert fetch(b, topic, 0, committed=True).aborted_transactions[0].first_offset == 0
    assert read_committed(b, topic, 5) == [(2, b"p2")]


def test_markers_refused_for_older_producer_or_coordinator_epochs(hanging):
    b, w, txn, topic, pid, epoch = hanging
    assert write_markers(w, pid, epoch - 1, -1, {topic: [0]}) == {
        (topic, 0): E.invalid_producer_epoch}
    assert producers(w, topic)[pid][2] == 0  # still open
    # The coordinator's own abort writes its epoch into the partition's producer state.
    assert w.end(txn, pid, epoch, False) == E.none
    _, coordinator_epoch, start = eventually(lambda: producers(w, topic)[pid],
                                             lambda p: p[2] == -1)
    assert start == -1 and coordinator_epoch >= 0
    assert write_markers(w, pid, epoch, coordinator_epoch - 1, {topic: [0]}) == {
        (topic, 0): E.transaction_coordinator_fenced}
    # The coordinator's epoch itself passes (a marker with nothing open changes nothing).
    before = latest(b, topic, committed=False)
    assert write_markers(w, pid, epoch, coordinator_epoch, {topic: [0]}) == {
        (topic, 0): E.none}
    assert latest(b, topic, committed=False) == before + 1


def test_coordinator_marker_fenced_by_an_admin_marker(hanging, kafka_broker):
    """An admin's marker with a coordinator epoch above the coordinator's own fences the
    coordinator's later marker there. Kafka stops sending that transaction's markers and
    leaves it PrepareCommit until its coordinator reloads (COMPATIBILITY.md); kafkalite, one
    coordinator that can never catch up, completes it, and the producer goes on."""
    b, w, txn, topic, pid, epoch = hanging
    assert write_markers(w, pid, epoch, 7, {topic: [0]}) == {(topic, 0): E.none}
    assert producers(w, topic)[pid] == (epoch, 7, -1)
    assert w.end(txn, pid, epoch, True) == E.none
    state = eventually(lambda: w.describe(txn).transaction_state,
                       lambda s: s != "PrepareCommit", timeout=3)
    if b != kafka_broker:
        assert state == "PrepareCommit"
        return
    assert state == "CompleteCommit"
    assert producers(w, topic)[pid] == (epoch, 7, -1)  # nothing written by the coordinator
    assert w.add(txn, pid, epoch, {topic: [0]}).results_by_topic_v3_and_below[0] \
        .results_by_partition[0].partition_error_code == E.none


def test_produce_verification_asks_for_the_request_transactional_id(hanging):
    """KIP-890 part 1 verifies a transaction's first batch in a partition for the request's
    transactional_id, as Kafka 3.8's AddPartitionsToTxnManager: a batch of another id's
    producer is refused with INVALID_PRODUCER_ID_MAPPING, whatever state that id is in.
    Later batches of a transaction open in the partition are not verified, as in Kafka."""
    b, w, txn, topic, pid, epoch = hanging
    unknown, other = f"unknown-{topic}", f"other-{topic}"
    # The admin's abort closes the transaction in the partition; the coordinator still
    # holds it Ongoing with the partition.
    assert write_markers(w, pid, epoch, -1, {topic: [0]}) == {(topic, 0): E.none}
    nxt = txn_batch(pid, epoch, 2, [b"t3"])
    assert produce(b, unknown, topic, nxt) == E.invalid_producer_id_mapping
    find_txn_coordinator(w, other)
    qid, qepoch = init_ok(w, other)
    assert produce(b, other, topic, nxt) == E.invalid_producer_id_mapping
    w.add(other, qid, qepoch, {topic: [0]})
    assert produce(b, other, topic, nxt) == E.invalid_producer_id_mapping
    assert produce(b, txn, topic, nxt) == E.none
    assert producers(w, topic)[pid][2] == 3
    assert produce(b, unknown, topic, txn_batch(pid, epoch, 3, [b"t4"])) == E.none


def test_list_transactions_v2_transactional_id_pattern(kafka_broker):
    """ListTransactions v2 (KIP-1152, Kafka 4.1; Kafka 3.8 serves 0-1, so kafkalite only):
    the pattern must match the whole id; an invalid one is INVALID_REGULAR_EXPRESSION."""
    tag = uuid.uuid4().hex[:8]
    ids = [f"lt2-{tag}-a", f"lt2-{tag}-b", f"other-{tag}"]
    w = Wire(kafka_broker)
    try:
        for txn in ids:
            find_txn_coordinator(w, txn)
            init_ok(w, txn)

        def listed(pattern):
            r = w.call(66, 2, state_filters=(), producer_id_filters=(), duration_filter=-1,
                       transactional_id_pattern=pattern)
            return r.error_code, sorted(t.transactional_id for t in r.transaction_states
                                        if tag in t.transactional_id)
        assert listed(f"lt2-{tag}-.*") == (E.none, ids[:2])
        assert listed(f"lt2-{tag}-[b]|other-{tag}") == (E.none, ids[1:])
        assert listed(f"lt2-{tag}") == (E.none, [])  # a prefix does not match the whole id
        assert listed(None) == listed("") == (E.none, sorted(ids))
        assert listed("lt2-(") == (E.invalid_regular_expression, [])
    finally:
        w.close()
