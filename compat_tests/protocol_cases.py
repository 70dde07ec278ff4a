# Per-API-key checks for test_protocol_versions.py: each `check(ctx, conn, version)` sends one
# minimal valid request at `version` and checks, field by field, what a client relies on.
# Requests are encoded and responses decoded by kafka-python's codec (compat_tests/wire.py).
#
# This module: the shared context and the data-plane / metadata keys. Group keys are in
# protocol_cases_groups.py, admin keys in protocol_cases_admin.py; keys with no specific check
# get `generic_check` (the answer decodes at that version and every error code in it is one
# Kafka defines), which is all a client can rely on for keys it does not use.
#
# Kafka facts relied on (apache/kafka 3.8.0 unless said otherwise):
# - ProduceRequest.validateRecords: v3+ carries exactly one magic-2 batch per partition; v0-2
#   are not validated, and 3.x appends magic 0/1 message sets. Kafka 4.0 removed v0-2 but still
#   advertises them for librdkafka (KAFKA-18659, ProduceRequest.json), and its SocketServer
#   closes a connection whose request version is not enabled (ApiKeys.isVersionEnabled).
# - KafkaApis.handleListOffsetRequestV0: v0 answers `old_style_offsets`; for -1 (latest) and
#   max_num_offsets=1 that is [high watermark], for -2 (earliest) [log start offset].
# - Fetch v13+ and Produce v13 name topics by id only (KIP-516).
from __future__ import annotations

import functools
import time
import uuid
from typing import Any, Callable

from kafka.errors import kafka_errors
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from compat_tests.conftest import Target, unique
from compat_tests.wire import Conn

NONE, UNSUPPORTED_VERSION = 0, 35
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
UNKNOWN_TOPIC_OR_PARTITION = 3
DATA_RECORDS = [(b"k0", b"v0", [("h", b"0")]), (b"k1", b"v1", []), (None, b"v2", [("h", b"2")])]
TOPIC_RETENTION_MS = "86400000"  # set on the data topic, so DescribeConfigs has a custom value

CHECKS: dict[int, Callable[["Ctx", Conn, int], None]] = {}


def check(api_key: int):
    def register(fn):
        CHECKS[api_key] = fn
        return fn
    return register


def batch(records: list[tuple[bytes | None, bytes | None, list]], magic: int = 2,
          compression: int = 0, producer: tuple[int, int, int] = (-1, -1, -1),
          timestamp: int | None = None) -> bytes:
    """A record batch (magic 2) or message set (magic 0/1) as a producer would send it."""
    if magic >= 2:
        pid, epoch, seq = producer
        b = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                      is_transactional=False, producer_id=pid,
                                      producer_epoch=epoch, base_sequence=seq,
                                      batch_size=16 << 20)
        for i, (k, v, h) in enumerate(records):
            b.append(i, timestamp=timestamp, key=k, value=v, headers=h)
    else:
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=compression,
                                     batch_size=16 << 20)
        for i, (k, v, _h) in enumerate(records):
            b.append(i, timestamp=None if magic == 0 else int(time.time() * 1000), key=k, value=v)
    return bytes(b.build())


def decode_records(raw: bytes | None) -> list[Any]:
    out = []
    recs = MemoryRecords(bytes(raw or b""))
    while True:
        b = recs.next_batch()
        if b is None:
            return out
        out.extend(b)


def known_error(code: int) -> bool:
    return code == 0 or code == -1 or code in kafka_errors


def error_codes(obj: Any, path: str = "") -> list[tuple[str, int]]:
    """Every error_code field in a decoded response, with where it was found."""
    found = []
    fields = getattr(obj, "_struct", None)
    if fields is None:
        return found
    for name in fields.fields:
        try:
            val = getattr(obj, name)
        except AttributeError:
            continue
        if name == "error_code" and isinstance(val, int):
            found.append((path + name, val))
        elif isinstance(val, list):
            for i, item in enumerate(val):
                found += error_codes(item, f"{path}{name}[{i}].")
        elif hasattr(val, "_struct"):
            found += error_codes(val, f"{path}{name}.")
    return found


def generic_check(ctx: "Ctx", conn: Conn, version: int, api_key: int) -> None:
    resp = conn.call(api_key, version, {})
    bad = [(p, c) for p, c in error_codes(resp) if not known_error(c)]
    assert not bad, f"error codes Kafka does not define: {bad}"


class Ctx:
    """Shared state for one protocol run; every piece is made on first use."""

    def __init__(self, target: Target):
        self.target = target
        self._once: dict[str, Any] = {}

    def once(self, name: str, factory: Callable[[], Any]) -> Any:
        """factory() on first use, then the same value."""
        if name not in self._once:
            self._once[name] = factory()
        return self._once[name]

    @property
    def brokers(self) -> list[int]:
        return self.target.node_ids

    @functools.cached_property
    def data_topic(self) -> str:
        """One partition holding DATA_RECORDS at offsets 0-2, produced at the highest version."""
        t = self.target.create_topic(config={"retention.ms": TOPIC_RETENTION_MS})
        resp = self.target.call(0, self.produce_fields(t, self.topic_id(t),
                                                       batch(DATA_RECORDS)))
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == 0 and part.base_offset == 0, f"seeding {t}: {part}"
        return t

    @functools.cached_property
    def produce_topic(self) -> str:
        return self.target.create_topic()

    @functools.cached_property
    def data_topic_id(self) -> uuid.UUID:
        return self.topic_id(self.data_topic)

    def topic_id(self, topic: str) -> uuid.UUID:
        if self.target.versions.get(3, (0, 0))[1] < 10:
            return uuid.UUID(int=0)
        return self.target.metadata([topic]).topics[0].topic_id

    @staticmethod
    def produce_fields(topic: str, topic_id: uuid.UUID, records: bytes, acks: int = -1) -> dict:
        return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
                "topic_data": [{"name": topic, "topic_id": topic_id,
                                "partition_data": [{"index": 0, "records": records}]}]}

    def retry_coordinator(self, fn: Callable[[], Any], code_of: Callable[[Any], int]) -> Any:
        """Kafka answers COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS / NOT_COORDINATOR while
        __consumer_offsets is created and loaded on first use; clients retry, so does this."""
        deadline = time.monotonic() + 20
        while True:
            resp = fn()
            if code_of(resp) not in (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
                                     NOT_COORDINATOR) \
                    or time.monotonic() > deadline:
                return resp
            time.sleep(0.2)


def produce(target: Target, topic: str, records: bytes, version: int | None = None,
            acks: int = -1) -> Any:
    """Produce one batch to partition 0 (by name: at most v12); the partition's answer."""
    v = min(target.version(0), 12) if version is None else version
    fields = Ctx.produce_fields(topic, None, records, acks)
    return target.call(0, fields, v).responses[0].partition_responses[0]


def list_offset(target: Target, topic: str, timestamp: int) -> int:
    """ListOffsets for partition 0: -1 latest, -2 earliest."""
    r = target.call(2, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


# --- Produce (0) --------------------------------------------------------------------------

@check(0)
def produce_check(ctx: Ctx, conn: Conn, v: int) -> None:
    topic = ctx.produce_topic
    tid = ctx.topic_id(topic)
    recs = [(b"key-%d" % v, b"value-%d" % v, [("v", str(v).encode())] if v >= 3 else [])]
    magic = 2 if v >= 3 else (1 if v == 2 else 0)
    fields = ctx.produce_fields(topic, tid, batch(recs, magic=magic))
    if v < 3:
        # 3.x appends the old message set; 4.x closes the connection (version not enabled);
        # kafkalite answers UNSUPPORTED_VERSION (a documented gap, COMPATIBILITY.md).
        from compat_tests.wire import ConnectionClosed
        try:
            resp = conn.call(0, v, fields)
        except (ConnectionClosed, ConnectionResetError):
            return
        part = resp.responses[0].partition_responses[0]
        assert part.error_code in (NONE, UNSUPPORTED_VERSION), part
        if part.error_code == NONE:
            assert part.base_offset >= 0
        return
    resp = conn.call(0, v, fields)
    assert len(resp.responses) == 1
    tr = resp.responses[0]
    if v >= 13:
        assert tr.topic_id == tid
    else:
        assert tr.name == topic
    part = tr.partition_responses[0]
    assert part.index == 0 and part.error_code == NONE, part
    assert part.base_offset >= 0
    # The answer's base offset is where the record is: read it back.
    last = ctx.__dict__.get("produce_last", -1)
    assert part.base_offset > last, f"base offset {part.base_offset} not after {last}"
    ctx.__dict__["produce_last"] = part.base_offset
    if v >= 2:
        assert part.log_append_time_ms == -1  # CreateTime topic
    if v >= 5:
        assert part.log_start_offset == 0


# --- Fetch (1) ----------------------------------------------------------------------------

def fetch_fields(topic: str, topic_id: uuid.UUID, offset: int, max_wait: int = 500) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": topic_id,
                        "partitions": [{"partition": 0, "fetch_offset": offset,
                                        "current_leader_epoch": -1, "log_start_offset": -1,
                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


@check(1)
def fetch(ctx: Ctx, conn: Conn, v: int) -> None:
    resp = conn.call(1, v, fetch_fields(ctx.data_topic, ctx.data_topic_id, 0))
    if v >= 7:
        assert resp.error_code == NONE and resp.session_id == 0, resp
    tr = resp.responses[0]
    assert (tr.topic_id == ctx.data_topic_id) if v >= 13 else (tr.topic == ctx.data_topic)
    part = tr.partitions[0]
    assert part.partition_index == 0 and part.error_code == NONE, part
    assert part.high_watermark == len(DATA_RECORDS)
    if v >= 4:
        assert part.last_stable_offset == len(DATA_RECORDS)
    if v >= 5:
        assert part.log_start_offset == 0
    recs = decode_records(part.records)
    assert [(r.offset, r.key, r.value) for r in recs] == \
        [(i, k, val) for i, (k, val, _h) in enumerate(DATA_RECORDS)]
    if v >= 4:  # magic 2 is served as stored: headers come back (v0-3 may be down-converted)
        assert [list(r.headers) for r in recs] == [h for _k, _v, h in DATA_RECORDS]


# --- ListOffsets (2) ----------------------------------------------------------------------

@check(2)
def list_offsets(ctx: Ctx, conn: Conn, v: int) -> None:
    for ts, expected in ((-2, 0), (-1, len(DATA_RECORDS))):
        resp = conn.call(2, v, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": ctx.data_topic, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts,
                 "max_num_offsets": 1}]}], "timeout_ms": 10000})
        tr = resp.topics[0]
        assert tr.name == ctx.data_topic
        part = tr.partitions[0]
        assert part.partition_index == 0 and part.error_code == NONE, part
        if v == 0:
            assert list(part.old_style_offsets) == [expected], part
        else:
            assert part.offset == expected, f"timestamp {ts}: {part}"
            assert part.timestamp == -1, part  # Kafka answers -1 for the -1/-2 queries
        if v >= 4:
            assert part.leader_epoch >= 0


# --- Metadata (3) -------------------------------------------------------------------------

@check(3)
def metadata(ctx: Ctx, conn: Conn, v: int) -> None:
    topic = ctx.data_topic
    resp = conn.call(3, v, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    assert sorted(b.node_id for b in resp.brokers) == ctx.brokers
    for b in resp.brokers:
        assert b.host and 0 < b.port < 65536, b
    if v >= 1:
        assert resp.controller_id in ctx.brokers or resp.controller_id == -1
    if v >= 2:
        assert resp.cluster_id, "cluster_id missing"
    if v >= 13:
        assert resp.error_code == NONE
    assert [t.name for t in resp.topics] == [topic]
    t = resp.topics[0]
    assert t.error_code == NONE, t
    if v >= 1:
        assert t.is_internal is False
    if v >= 10:
        assert t.topic_id == ctx.data_topic_id and t.topic_id.int != 0
    assert [p.partition_index for p in t.partitions] == [0]
    p = t.partitions[0]
    assert p.error_code == NONE and p.leader_id in ctx.brokers, p
    assert p.leader_id in p.replica_nodes and p.leader_id in p.isr_nodes
    if v >= 7:
        assert p.leader_epoch >= 0
    if v >= 4:
        # Asking for a missing topic without auto-create names it with UNKNOWN_TOPIC_OR_PARTITION.
        missing = unique("missing")
        resp = conn.call(3, v, {"topics": [{"name": missing}],
                                "allow_auto_topic_creation": False})
        assert [(t.name, t.error_code) for t in resp.topics] == \
            [(missing, UNKNOWN_TOPIC_OR_PARTITION)]
    if v >= 1:
        # A null topic list means every topic.
        resp = conn.call(3, v, {"topics": None, "allow_auto_topic_creation": False})
        assert topic in {t.name for t in resp.topics}


# --- ApiVersions (18) ---------------------------------------------------------------------

@check(18)
def api_versions(ctx: Ctx, conn: Conn, v: int) -> None:
    resp = conn.call(18, v, {"client_software_name": "compat-tests",
                             "client_software_version": "1.0"})
    assert resp.error_code == NONE
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys == ctx.target.versions
    lo, hi = keys[18]
    assert lo <= v <= hi


# --- InitProducerId (22) ------------------------------------------------------------------

@check(22)
def init_producer_id(ctx: Ctx, conn: Conn, v: int) -> None:
    # A fresh Kafka answers LOAD_IN_PROGRESS until it holds a block of producer ids.
    resp = ctx.retry_coordinator(
        lambda: conn.call(22, v, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1}),
        lambda r: r.error_code)
    assert resp.error_code == NONE, resp
    assert resp.producer_id >= 0 and resp.producer_epoch >= 0, resp
    seen = ctx.__dict__.setdefault("producer_ids", set())
    assert resp.producer_id not in seen, "a producer id handed out twice"
    seen.add(resp.producer_id)


# --- OffsetForLeaderEpoch (23) ------------------------------------------------------------

@check(23)
def offset_for_leader_epoch(ctx: Ctx, conn: Conn, v: int) -> None:
    meta = ctx.target.metadata([ctx.data_topic]).topics[0].partitions[0]
    epoch = max(meta.leader_epoch, 0)
    resp = conn.call(23, v, {"replica_id": -1, "topics": [
        {"topic": ctx.data_topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}]})
    part = resp.topics[0].partitions[0]
    assert part.error_code == NONE and part.partition == 0, part
    assert part.end_offset == len(DATA_RECORDS), part
    if v >= 1:
        assert part.leader_epoch == epoch
