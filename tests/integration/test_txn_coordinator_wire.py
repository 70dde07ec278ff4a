# The transaction coordinator's APIs over raw requests, against kafkalite and the real Kafka
# 3.8 (any_broker): the same requests must get the same answers, field by field.
# Requests are encoded and responses decoded with kio (the schemas of every version).
from __future__ import annotations

import datetime
import importlib.util
import socket
import struct
import sys
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader, entity_writer

from tests.helpers.kbatch import connect, recv_frame
from tests.helpers.real_kafka import create_topic, eventually

MS = datetime.timedelta(milliseconds=1)
HAVE_MARKERS = importlib.util.find_spec("kafkalite.broker.txn_markers") is not None


class Wire:
    def __init__(self, bootstrap: str):
        self.sock: socket.socket = connect(bootstrap)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, key: int, version: int, **fields):
        import io
        cls = load_request_schema(key, version)
        mod = sys.modules[cls.__module__]
        body = io.BytesIO()
        entity_writer(cls)(body, cls(**fields))
        self.corr += 1
        flexible = cls.__flexible__
        cid = b"txa-test"
        head = struct.pack(">hhih", key, version, self.corr, len(cid)) + cid
        if flexible:
            head += b"\x00"
        frame = head + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = recv_frame(self.sock)
        (corr,) = struct.unpack_from(">i", data)
        assert corr == self.corr
        pos = 4 + (1 if flexible else 0)
        if key == 65:
            return _describe_response(data, pos)
        resp, _ = entity_reader(load_response_schema(key, version))(data, pos)
        del mod
        return resp

    def mod(self, key: int, version: int, request: bool = True):
        cls = (load_request_schema if request else load_response_schema)(key, version)
        return sys.modules[cls.__module__]

    def init(self, txn: str, timeout_ms: int = 60000, version: int = 4, pid: int = -1,
             epoch: int = -1):
        fields = dict(transactional_id=txn, transaction_timeout=timeout_ms * MS)
        if version >= 3:
            fields.update(producer_id=pid, producer_epoch=epoch)
        return self.call(22, version, **fields)

    def add(self, txn: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3):
        m = self.mod(24, version)
        return self.call(24, version, v3_and_below_transactional_id=txn,
                         v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                         v3_and_below_topics=tuple(m.AddPartitionsToTxnTopic(
                             name=t, partitions=tuple(p)) for t, p in parts.items()))

    def verify(self, txn: str, pid: int, epoch: int, parts: dict[str, list[int]]):
        m = self.mod(24, 4)
        return self.call(24, 4, transactions=(m.AddPartitionsToTxnTransaction(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(p))
                         for t, p in parts.items())),))

    def end(self, txn: str, pid: int, epoch: int, commit: bool, version: int = 3):
        return self.call(26, version, transactional_id=txn, producer_id=pid,
                         producer_epoch=epoch, committed=commit).error_code

    def describe(self, txn: str):
        return self.call(65, 0, transactional_ids=(txn,)).transaction_states[0]

    def list(self, states=(), pids=(), duration: int = -1):
        return self.call(66, 1, state_filters=tuple(states), producer_id_filters=tuple(pids),
                         duration_filter=duration)


def _describe_response(data: bytes, pos: int):
    """DescribeTransactions v0 by hand: kio refuses its start time of -1 (no transaction)."""
    from types import SimpleNamespace as NS

    from kafkalite.coordinator.transactions_log import _Reader
    r = _Reader(data, pos, flexible=True)
    r.fixed(">i")
    states = []
    for _ in range(r.uvarint() - 1):
        st = NS(error_code=E(r.fixed(">h")), transactional_id=r.string(),
                transaction_state=r.string(), transaction_timeout=r.fixed(">i") * MS,
                transaction_start_time=r.fixed(">q"), producer_id=r.fixed(">q"),
                producer_epoch=r.fixed(">h"), topics=[])
        for _ in range(r.uvarint() - 1):
            topic = r.string()
            parts = tuple(r.fixed(">i") for _ in range(r.uvarint() - 1))
            r.skip_tags()
            st.topics.append(NS(topic=topic, partitions=parts))
        st.topics = tuple(st.topics)
        r.skip_tags()
        states.append(st)
    return NS(transaction_states=tuple(states))


def errors_v3(resp) -> dict:
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def errors_v4(resp) -> dict:
    (txn,) = resp.results_by_transaction
    return {(t.name, p.partition_index): p.partition_error_code
            for t in txn.topic_results for p in t.results_by_partition}


@pytest.fixture
def wire(any_broker):
    w = Wire(any_broker)
    w.bootstrap = any_broker
    yield w
    w.close()


def names() -> tuple[str, str]:
    u = uuid.uuid4().hex[:10]
    return f"txn-{u}", f"topic-{u}"


def find_txn_coordinator(w: Wire, txn: str) -> None:
    """FindCoordinator key type 1, until the coordinator is ready (Kafka creates
    __transaction_state on the first lookup and answers COORDINATOR_NOT_AVAILABLE meanwhile)."""
    def probe():
        return w.call(10, 4, key_type=1, coordinator_keys=(txn,)).coordinators[0].error_code
    assert eventually(probe, lambda e: e == E.none, timeout=30) == E.none


def init_ok(w: Wire, txn: str, **kw):
    resp = eventually(lambda: w.init(txn, **kw),
                      lambda r: r.error_code not in (E.coordinator_load_in_progress,
                                                     E.coordinator_not_available,
                                                     E.not_coordinator), timeout=30)
    assert resp.error_code == E.none, resp
    return resp.producer_id, resp.producer_epoch


def test_init_add_verify_describe_list(wire):
    txn, topic = names()
    create_topic(wire.bootstrap, topic, partitions=3)
    find_txn_coordinator(wire, txn)
    pid, epoch = init_ok(wire, txn)
    assert epoch == 0
    d = wire.describe(txn)
    assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch,
            d.transaction_timeout, d.topics) == (E.none, "Empty", pid, 0, 60000 * MS, ())
    assert d.transaction_start_time == -1
    # Re-init bumps the epoch.
    assert init_ok(wire, txn) == (pid, 1)
    epoch = 1
    # Unknown partitions: nothing is added.
    resp = wire.add(txn, pid, epoch, {topic: [0, 7]})
    assert errors_v3(resp) == {(topic, 0): E.operation_not_attempted,
                               (topic, 7): E.unknown_topic_or_partition}
    resp = wire.add(txn, pid, epoch, {topic: [0, 1]})
    assert errors_v3(resp) == {(topic, 0): E.none, (topic, 1): E.none}
    d = wire.describe(txn)
    assert d.transaction_state == "Ongoing"
    assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(topic, [0, 1])]
    assert d.transaction_start_time > 0
    # Verify-only (v4): added partitions NONE, others TRANSACTION_ABORTABLE; nothing added.
    resp = wire.verify(txn, pid, epoch, {topic: [0, 2]})
    assert resp.error_code == E.none
    assert errors_v4(resp) == {(topic, 0): E.none, (topic, 2): E.transaction_abortable}
    assert errors_v4(wire.verify(txn, pid, epoch - 1, {topic: [0]})) == {
        (topic, 0): E.producer_fenced}
    assert errors_v4(wire.verify(txn, pid + 1, epoch, {topic: [0]})) == {
        (topic, 0): E.invalid_producer_id_mapping}
    assert len(wire.describe(txn).topics[0].partitions) == 2
    # ListTransactions with filters.
    lst = wire.list(states=["Ongoing", "Bogus"], pids=[pid])
    assert lst.error_code == E.none and lst.unknown_state_filters == ("Bogus",)
    assert [(s.transactional_id, s.producer_id, s.transaction_state)
            for s in lst.transaction_states] == [(txn, pid, "Ongoing")]
    assert wire.list(states=["Empty"], pids=[pid]).transaction_states == ()
    assert wire.list(pids=[pid], duration=3_600_000).transaction_states == ()
    assert len(wire.list(pids=[pid], duration=0).transaction_states) == 1


def test_coordinator_errors(wire):
    txn, topic = names()
    create_topic(wire.bootstrap, topic)
    find_txn_coordinator(wire, txn)
    r = wire.init(txn, timeout_ms=900001)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (
        E.invalid_transaction_timeout, -1, -1)
    assert wire.init(txn, timeout_ms=0).error_code == E.invalid_transaction_timeout
    assert wire.init(txn, pid=5, epoch=-1).error_code == E.invalid_request
    assert wire.init("", timeout_ms=1000).error_code == E.invalid_request
    pid, epoch = init_ok(wire, txn)
    # No transaction open.
    assert wire.end(txn, pid, epoch, True) == E.invalid_txn_state
    assert wire.end(txn, pid + 1, epoch, True) == E.invalid_producer_id_mapping
    assert wire.end(f"{txn}-unknown", pid, epoch, False) == E.invalid_producer_id_mapping
    # An older epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
    init_ok(wire, txn)
    assert wire.end(txn, pid, epoch, True, version=2) == E.producer_fenced
    assert wire.end(txn, pid, epoch, True, version=1) == E.invalid_producer_epoch
    assert set(errors_v3(wire.add(txn, pid, epoch, {topic: [0]}, version=1)).values()) == {
        E.invalid_producer_epoch}
    assert set(errors_v3(wire.add(txn, pid, epoch, {topic: [0]}, version=2)).values()) == {
        E.producer_fenced}
    # KIP-360 with a stale epoch: fenced (INVALID_PRODUCER_EPOCH before v4).
    assert wire.init(txn, version=3, pid=pid, epoch=0).error_code == E.invalid_producer_epoch
    assert wire.init(txn, version=4, pid=pid, epoch=0).error_code == E.producer_fenced
    # KIP-360 with the current epoch: bumped.
    r = wire.init(txn, version=4, pid=pid, epoch=1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, 2)
    d = wire.call(65, 0, transactional_ids=(f"{txn}-unknown", "")).transaction_states
    assert [(s.error_code, s.transaction_state, s.producer_id, s.producer_epoch)
            for s in d] == [(E.transactional_id_not_found, "", 0, 0),
                            (E.invalid_request, "", 0, 0)]
    # AddOffsetsToTxn: the group's offsets partition joins the transaction.
    assert wire.call(25, 3, transactional_id=txn, producer_id=pid, producer_epoch=2,
                     group_id="g").error_code == E.none
    assert [t.topic for t in wire.describe(txn).topics] == ["__consumer_offsets"]
    assert wire.call(25, 1, transactional_id=txn, producer_id=pid, producer_epoch=1,
                     group_id="g").error_code == E.invalid_producer_epoch


@pytest.fixture
def wire_with_markers(wire, request):
    if "kafkalite" in request.node.callspec.id and not HAVE_MARKERS:
        pytest.skip("kafkalite.broker.txn_markers (the log side's marker writer) is not "
                    "in this tree yet")
    return wire


def test_commit_abort_and_fencing_by_a_new_instance(wire_with_markers):
    wire = wire_with_markers
    txn, topic = names()
    create_topic(wire.bootstrap, topic, partitions=2)
    find_txn_coordinator(wire, txn)
    pid, epoch = init_ok(wire, txn)
    assert set(errors_v3(wire.add(txn, pid, epoch, {topic: [0, 1]})).values()) == {E.none}
    assert wire.end(txn, pid, epoch, True) == E.none
    d = eventually(lambda: wire.describe(txn), lambda d: d.transaction_state == "CompleteCommit")
    assert (d.transaction_state, d.topics) == ("CompleteCommit", ())
    assert wire.end(txn, pid, epoch, True) == E.none  # a retry
    assert wire.end(txn, pid, epoch, False) == E.invalid_txn_state
    # A second transaction, then a new instance: the open one is aborted, epoch bumped twice.
    assert set(errors_v3(wire.add(txn, pid, epoch, {topic: [1]})).values()) == {E.none}
    assert wire.init(txn).error_code == E.concurrent_transactions
    d = eventually(lambda: wire.describe(txn), lambda d: d.transaction_state == "CompleteAbort")
    assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", epoch + 1)
    assert init_ok(wire, txn) == (pid, epoch + 2)
    assert wire.end(txn, pid, epoch, True) == E.producer_fenced


def test_transaction_state_records_have_kafkas_layout(wire):
    """Each broker's own __transaction_state records, read back over Fetch: keyed and laid
    out as Kafka 3.8 writes them (kafkalite's encoder reproduces Kafka's bytes exactly)."""
    from kafkalite.coordinator.offsets_log import partition_for
    from kafkalite.coordinator.transactions_log import decode_value, encode_key, encode_value
    from tests.helpers.kbatch import decode_records, fetch_raw

    txn, topic = names()
    create_topic(wire.bootstrap, topic, partitions=2)
    find_txn_coordinator(wire, txn)
    pid, epoch = init_ok(wire, txn, timeout_ms=45000)
    wire.add(txn, pid, epoch, {topic: [1, 0]})
    partition = partition_for(txn, 50)  # both brokers: 50 partitions, Kafka's hash

    def ours() -> list[bytes]:
        # Kafka's high watermark may trail its own write for a moment: read until both show.
        with connect(wire.bootstrap) as s:
            data = bytes(fetch_raw(s, "__transaction_state", partition, 0).records or b"")
        return [v for _, _, k, v, _ in decode_records(data) if k == encode_key(txn)]
    values = eventually(ours, lambda vs: len(vs) >= 2)
    assert len(values) == 2
    empty, ongoing = (decode_value(txn, v) for v in values)
    assert (empty.producer_id, empty.producer_epoch, empty.timeout_ms, empty.state.name,
            empty.partitions, empty.start_ms) == (pid, 0, 45000, "EMPTY", frozenset(), -1)
    assert (ongoing.state.name, ongoing.partitions) == (
        "ONGOING", frozenset({(topic, 0), (topic, 1)}))
    assert ongoing.start_ms == ongoing.update_ms > 0
    for v in values:
        # Byte for byte, but for the order of partition ids inside a topic entry: Kafka
        # writes them in its HashSet's iteration order, which depends on the topic name.
        again = encode_value(decode_value(txn, v))
        assert len(again) == len(v) and decode_value(txn, again) == decode_value(txn, v)
        if len(decode_value(txn, v).partitions) < 2:
            assert again == v
