# Shared pieces of the reliability harnesses: a broker handle that can be killed and measured,
# and a raw-protocol reader that CRC-checks every batch the broker serves.
#
# Requests are encoded and responses decoded by kafka-python's independent codec (through
# compat_tests/wire.py), so a misreading shared with kafkalite's own codec cannot hide a bug.
# Every batch served is checked twice: CRC32C over attributes..end computed here, and
# kafka-python's DefaultRecordBatch.validate_crc; a mismatch raises CorruptBatchServed.
from __future__ import annotations

import os
import random
import re
import struct
import time
from dataclasses import dataclass
from typing import Any

import crc32c
import psutil
from kafka.record.default_records import DefaultRecordBatch

from compat_tests.wire import Conn, ConnectionClosed
from kafkalite.testing import BrokerProcess

__all__ = ["Broker", "Conn", "ConnectionClosed", "CorruptBatchServed", "OffsetOutOfRange",
           "Rec", "fetch_range",
           "list_offsets", "create_topic", "offset_fetch", "produce_batch", "build_batch"]


class OffsetOutOfRange(AssertionError):
    """Fetch answered OFFSET_OUT_OF_RANGE (retention moved the log start meanwhile)."""


class CorruptBatchServed(AssertionError):
    """The broker served a batch whose CRC does not match its bytes."""


@dataclass(frozen=True, slots=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


class Broker(BrokerProcess):
    """BrokerProcess plus what the harnesses measure: time to answer, RSS, log lines."""

    def start_measured(self, timeout: float = 60.0) -> float:
        """Start and wait until ApiVersions is answered; returns seconds from spawn."""
        t0 = time.monotonic()
        self.start(timeout=timeout)
        deadline = t0 + timeout
        while True:
            try:
                with Conn(self.bootstrap, timeout=5.0) as c:
                    c.call(18, 0)
                return time.monotonic() - t0
            except (OSError, ConnectionClosed, TimeoutError):
                if time.monotonic() > deadline or self.proc is None or self.proc.poll() is not None:
                    raise RuntimeError("broker did not answer ApiVersions in time:\n"
                                       + self.read_log()[-3000:])
                time.sleep(0.05)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_mb(self) -> float:
        assert self.proc is not None
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def log_since(self, mark: int) -> str:
        return self.read_log()[mark:]

    def log_mark(self) -> int:
        return len(self.read_log())


def create_topic(conn: Conn, name: str, partitions: int,
                 configs: dict[str, str] | None = None) -> None:
    resp = conn.call(19, 5, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 15000, "validate_only": False})
    code = resp.topics[0].error_code
    if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
        raise AssertionError(f"CreateTopics {name}: error {code}")


def list_offsets(conn: Conn, topic: str, partitions: list[int],
                 timestamp: int = -1) -> dict[int, int]:
    """{partition: offset} for -1 (end), -2 (start) or a timestamp."""
    resp = conn.call(2, 5, {
        "replica_id": -1, "isolation_level": 0, "timeout_ms": 10000,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp,
             "max_num_offsets": 1} for p in partitions]}]})
    out = {}
    for part in resp.topics[0].partitions:
        if part.error_code:
            raise AssertionError(f"ListOffsets {topic}-{part.partition_index}: "
                                 f"error {part.error_code}")
        out[part.partition_index] = part.offset
    return out


def offset_fetch(conn: Conn, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """Committed offsets ({partition: offset}, -1 when none); OffsetFetch v7."""
    resp = conn.call(9, 7, {"group_id": group, "require_stable": False,
                            "topics": [{"name": topic, "partition_indexes": partitions}]})
    if resp.error_code:
        raise AssertionError(f"OffsetFetch {group}: error {resp.error_code}")
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise AssertionError(f"OffsetFetch {group} {topic}-{p.partition_index}: "
                                     f"error {p.error_code}")
            out[p.partition_index] = p.committed_offset
    return out


def check_batch_crc(data: bytes, pos: int, size: int) -> None:
    stored = struct.unpack_from(">I", data, pos + 17)[0]
    if crc32c.crc32c(memoryview(data)[pos + 21:pos + size]) != stored:
        raise CorruptBatchServed(f"CRC32C mismatch in a served batch "
                                 f"(base offset {struct.unpack_from('>q', data, pos)[0]})")


def decode_batches(data: bytes) -> tuple[list[Rec], int]:
    """Records of the whole batches in fetched bytes (a cut-short last batch is ignored, as
    clients do), each batch CRC-checked; returns (records, offset after the last batch)."""
    out: list[Rec] = []
    pos = 0
    next_offset = -1
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = 12 + length
        if length < 49 or pos + size > len(data):
            break
        check_batch_crc(data, pos, size)
        batch = DefaultRecordBatch(data[pos:pos + size])
        if not batch.validate_crc():
            raise CorruptBatchServed(f"kafka-python rejects the CRC of batch at {base}")
        for r in batch:
            out.append(Rec(r.offset, r.key, r.value, r.timestamp))
        next_offset = base + struct.unpack_from(">i", data, pos + 23)[0] + 1
        pos += size
    return out, next_offset


def fetch_raw(conn: Conn, topic: str, partition: int, offset: int, max_bytes: int) -> bytes:
    """The record bytes of one sessionless Fetch v11 of one partition."""
    resp = conn.call(1, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": max_bytes}]}]})
    part = resp.responses[0].partitions[0]
    if part.error_code == 1:
        raise OffsetOutOfRange(f"Fetch {topic}-{partition}@{offset}: OFFSET_OUT_OF_RANGE")
    if part.error_code:
        raise AssertionError(f"Fetch {topic}-{partition}@{offset}: error {part.error_code}")
    return bytes(part.records or b"")


def fetch_range(conn: Conn, topic: str, partition: int, start: int, end: int,
                max_bytes: int = 1 << 20, deadline_s: float = 120.0) -> list[Rec]:
    """Every record in [start, end) through sessionless Fetch v11 requests."""
    out: list[Rec] = []
    offset = start
    deadline = time.monotonic() + deadline_s
    while offset < end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {topic}-{partition} stalled at {offset}")
        recs, nxt = decode_batches(fetch_raw(conn, topic, partition, offset, max_bytes))
        if nxt <= offset:
            raise AssertionError(f"Fetch {topic}-{partition}@{offset} made no progress")
        out.extend(r for r in recs if offset <= r.offset < end)
        offset = nxt
    return out


def build_batch(records: list[tuple[bytes | None, bytes | None]], ts: int | None = None,
                producer: tuple[int, int, int] = (-1, -1, -1), codec: int = 0) -> bytes:
    """A magic-2 batch as a producer builds it (kafka-python's builder)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    pid, epoch, seq = producer
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 30)
    now = int(time.time() * 1000) if ts is None else ts
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=now + i, key=k, value=v, headers=[])
    return bytes(b.build())


def produce_batch(conn: Conn, topic: str, partition: int, batch: bytes,
                  version: int = 9) -> tuple[int, int]:
    """Produce one batch with acks=all; returns (error code, base offset)."""
    resp = conn.call(0, version, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": batch}]}]})
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def payload(key: bytes, lo: int = 20, hi: int = 400) -> bytes:
    """The value belonging to a key: deterministic bytes of a key-dependent length, so a
    record read back can be checked byte for byte without keeping what was sent."""
    rnd = random.Random(key)
    return key + b"|" + rnd.randbytes(rnd.randint(lo, hi))


def dir_files(path: str) -> dict[str, int]:
    """{relative path: size} of every file under `path` (for reports)."""
    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            try:
                out[os.path.relpath(full, path)] = os.path.getsize(full)
            except OSError:
                pass
    return out


LOADED_RE = re.compile(r"Loaded (\d+) topics from .* in [0-9.]+s \((clean|recovered)\)")


def loaded_lines(text: str) -> list[tuple[int, str]]:
    """(topic count, "clean"/"recovered") of every start in a broker log."""
    return [(int(m.group(1)), m.group(2)) for m in LOADED_RE.finditer(text)]


def emit(result: Any, json_path: str | None) -> None:
    """Print a harness result as JSON, and write it to `json_path` when given."""
    import json
    print(json.dumps(result, indent=1))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
