# Case generators for the wire fuzzer (fuzz.py): valid requests for every advertised
# (API key, version), built by kafka-python's codec from small templates, and the mutations
# applied to their bytes. Every generator returns (kind, frame bytes, expectation), where the
# expectation says what a correct broker must do: "answer" (a response with this
# correlation id must come back, e.g. for unknown tagged fields, which the protocol says to
# skip), "error" (a Produce answered with a non-zero error code), or "any" (answer or close
# the connection, but stay up and in sync).
from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import crc32c

from compat_tests.wire import build, has_schema

from .common import build_batch

FUZZ_TOPIC = "fuzz"
CID = 0x5A5A0001
BATCH_MUTATIONS = ("bad_crc", "wrong_count", "bad_magic", "absurd_timestamp",
                   "future_timestamp", "bad_length", "bad_compression", "control_bit",
                   "negative_delta", "records_garbage")


def templates(topic_id: uuid.UUID, batch: bytes) -> dict[int, dict[str, Any]]:
    """Fields that make a request about something that exists; {} elsewhere."""
    group = "fuzz-group"
    acl_filter = {"resource_type_filter": 1, "resource_name_filter": None,
                  "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                  "operation": 1, "permission_type": 1}
    part_fetch = {"partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                  "log_start_offset": -1, "partition_max_bytes": 65536, "last_fetched_epoch": -1}
    return {
        0: {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": FUZZ_TOPIC, "topic_id": topic_id,
                            "partition_data": [{"index": 0, "records": batch}]}]},
        1: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 65536,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic": FUZZ_TOPIC, "topic_id": topic_id, "partitions": [part_fetch]}]},
        2: {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000,
            "topics": [{"name": FUZZ_TOPIC, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1,
                 "max_num_offsets": 1}]}]},
        3: {"topics": [{"name": FUZZ_TOPIC, "topic_id": topic_id}],
            "allow_auto_topic_creation": False},
        8: {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": FUZZ_TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                 "commit_timestamp": -1, "committed_metadata": "m"}]}]},
        9: {"group_id": group, "require_stable": False,
            "topics": [{"name": FUZZ_TOPIC, "partition_indexes": [0]}],
            "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": FUZZ_TOPIC, "partition_indexes": [0]}]}]},
        10: {"key": group, "key_type": 0, "coordinator_keys": [group]},
        11: {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000,
             "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00"}],
             "reason": None},
        19: {"topics": [{"name": "fuzz-created", "num_partitions": 1, "replication_factor": 1,
                         "assignments": [], "configs": []}],
             "timeout_ms": 5000, "validate_only": True},
        22: {"transactional_id": None, "transaction_timeout_ms": 60000},
        # ACL filters and creations with valid codes: code 0 (UNKNOWN) makes Kafka, and so
        # kafkalite, close the connection, which a "valid request" case must not provoke.
        29: acl_filter,
        30: {"creations": [{"resource_type": 2, "resource_name": "fuzz",
                            "resource_pattern_type": 3, "principal": "User:fuzz", "host": "*",
                            "operation": 3, "permission_type": 3}]},
        31: {"filters": [acl_filter]},
    }


class Requests:
    """Valid framed requests for every (key, version) both the broker and kafka-python speak."""

    def __init__(self, versions: dict[int, tuple[int, int]], topic_id: uuid.UUID):
        self.topic_id = topic_id
        self.batch = build_batch([(b"k", b"fuzz value")])
        tmpl = templates(topic_id, self.batch)
        self.frames: dict[tuple[int, int], bytes] = {}
        self.skipped: list[tuple[int, int]] = []
        for key, (lo, hi) in sorted(versions.items()):
            for v in range(lo, hi + 1):
                if not has_schema(key, v):
                    self.skipped.append((key, v))
                    continue
                req = None
                for fields in (tmpl.get(key, {}), {}):
                    try:
                        req = build(key, v, fields)
                        req.with_header(correlation_id=CID, client_id="fuzz")
                        self.frames[(key, v)] = req.encode(header=True, framed=True)
                        break
                    except Exception:  # a template field this version cannot carry
                        continue
                if (key, v) not in self.frames:
                    self.skipped.append((key, v))
        self.pairs = sorted(self.frames)

    def flexible(self, key: int, v: int) -> bool:
        from compat_tests.wire import request_class
        return bool(request_class(key)[v].flexible_version_q(v))


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def mutate_bytes(body: bytearray, rnd: random.Random, protect: int = 0) -> str:
    """One random mutation of `body` past `protect` bytes; returns its name."""
    n = len(body)
    if n <= protect:
        body.extend(rnd.randbytes(4))
        return "append"
    i = rnd.randrange(protect, n)
    m = rnd.choice(("flip", "byte", "int16", "int32", "varint", "delete", "insert", "dup"))
    if m == "flip":
        body[i] ^= 1 << rnd.randrange(8)
    elif m == "byte":
        body[i] = rnd.choice((0x00, 0x7F, 0x80, 0xFF))
    elif m in ("int16", "int32"):
        fmt, vals = (">h", (-1, -2, 0x7FFF, -0x8000, 0)) if m == "int16" else \
            (">i", (-1, -2, 0x7FFFFFFF, -0x80000000, 0, 1 << 24))
        raw = struct.pack(fmt, rnd.choice(vals))
        body[i:i + len(raw)] = raw
    elif m == "varint":  # an unterminated or over-long unsigned varint
        body[i:i] = b"\xff" * rnd.randint(5, 11)
    elif m == "delete":
        del body[i:i + rnd.randint(1, 16)]
    elif m == "insert":
        body[i:i] = rnd.randbytes(rnd.randint(1, 16))
    else:
        j = min(n, i + rnd.randint(1, 32))
        body[i:i] = body[i:j]
    return m


def mutated_request(reqs: Requests, rnd: random.Random) -> tuple[str, bytes, str]:
    key, v = rnd.choice(reqs.pairs)
    body = bytearray(reqs.frames[(key, v)][4:])
    for _ in range(rnd.randint(1, 3)):
        mutate_bytes(body, rnd, protect=8)
    return f"mutated:{key}", _frame(bytes(body)), "any"


def header_mutation(reqs: Requests, rnd: random.Random) -> tuple[str, bytes, str]:
    key, v = rnd.choice(reqs.pairs)
    body = bytearray(reqs.frames[(key, v)][4:])
    what = rnd.choice(("api_key", "version", "client_id_len"))
    if what == "api_key":
        struct.pack_into(">h", body, 0, rnd.choice((-1, 999, 0x7FFF, rnd.randrange(100, 30000))))
    elif what == "version":
        struct.pack_into(">h", body, 2, rnd.choice((-1, v + 1, 0x7FFF, -0x8000)))
    else:
        struct.pack_into(">h", body, 8, rnd.choice((-2, -0x8000, 0x7FFF, len(body))))
    return f"header:{what}", _frame(bytes(body)), "any"


def tagged_fields(reqs: Requests, rnd: random.Random) -> tuple[str, bytes, str]:
    """Unknown tagged fields in a flexible request header: valid; must be answered."""
    flex = [(k, v) for k, v in reqs.pairs if reqs.flexible(k, v) and k != 18]
    key, v = rnd.choice(flex)
    body = reqs.frames[(key, v)][4:]
    (clen,) = struct.unpack_from(">h", body, 8)
    at = 10 + max(clen, 0)
    assert body[at] == 0, "header v2 with no tagged fields expected"
    tags = []
    tag = rnd.randint(1000, 5000)
    for _ in range(rnd.randint(1, 3)):
        data = rnd.randbytes(rnd.randint(0, 40))
        tags.append(bytes([tag & 0x7F | 0x80, tag >> 7]) + bytes([len(data)]) + data)
        tag += rnd.randint(1, 50)
    new = body[:at] + bytes([len(tags)]) + b"".join(tags) + body[at + 1:]
    return f"tagged:{key}", _frame(new), "answer" if key != 0 else "any"


def raw_frames(rnd: random.Random) -> tuple[str, bytes, str]:
    k = rnd.choice(("random", "empty", "huge_length", "negative_length", "short_header"))
    if k == "random":
        return "frame:random", _frame(rnd.randbytes(rnd.randint(0, 3000))), "any"
    if k == "empty":
        return "frame:empty", _frame(b""), "any"
    if k == "huge_length":
        size = rnd.choice((0x7FFFFFFF, 104857601, 1 << 30, 200 << 20))
        return "frame:huge_length", struct.pack(">i", size) + rnd.randbytes(64), "closed"
    if k == "negative_length":
        size = rnd.choice((-1, -2, -0x80000000, -1000))
        return "frame:negative_length", struct.pack(">i", size) + rnd.randbytes(64), "closed"
    return "frame:short_header", _frame(rnd.randbytes(rnd.randint(1, 9))), "any"


def truncated(reqs: Requests, rnd: random.Random) -> tuple[str, bytes, str]:
    key, v = rnd.choice(reqs.pairs)
    body = reqs.frames[(key, v)][4:]
    cut = rnd.randrange(0, len(body))
    if rnd.random() < 0.5:  # a frame whose body stops short of the request's end
        return "truncated:body", _frame(body[:cut]), "any"
    # a frame promising more bytes than arrive before the client goes away
    return "truncated:frame", struct.pack(">i", len(body)) + body[:cut], "eof"


def bad_batch(reqs: Requests, rnd: random.Random) -> tuple[str, bytes, str]:
    """A Produce (v3+) whose batch is framed well but invalid in one way; CRC is fixed up
    after the change unless the change is the CRC."""
    versions = [v for k, v in reqs.pairs if k == 0 and v >= 3]
    v = rnd.choice(versions)
    what = rnd.choice(BATCH_MUTATIONS)
    recs = [(b"k%d" % i, rnd.randbytes(rnd.randint(0, 64))) for i in range(rnd.randint(1, 4))]
    b = bytearray(build_batch(recs))
    if what == "bad_crc":
        struct.pack_into(">I", b, 17, struct.unpack_from(">I", b, 17)[0] ^ 1)
    elif what == "wrong_count":
        struct.pack_into(">i", b, 57, rnd.choice((0, -1, len(recs) + 1, 0x7FFFFFFF)))
    elif what == "bad_magic":
        b[16] = rnd.choice((0, 1, 3, 0xFF))
    elif what == "absurd_timestamp":
        struct.pack_into(">q", b, 27, rnd.choice((-(1 << 63), -5, 1 << 62)))
        struct.pack_into(">q", b, 35, rnd.choice((-(1 << 63), -5, 1 << 62)))
    elif what == "future_timestamp":
        ts = struct.unpack_from(">q", b, 27)[0] + 10 * 86_400_000
        struct.pack_into(">q", b, 27, ts)
        struct.pack_into(">q", b, 35, ts)
    elif what == "bad_length":
        struct.pack_into(">i", b, 8, rnd.choice((0, 10, len(b), len(b) * 4, -1)))
    elif what == "bad_compression":
        b[22] = (b[22] & 0xF8) | rnd.choice((1, 2, 3, 4, 5, 6, 7))
    elif what == "control_bit":
        b[22] |= 0x20
    elif what == "negative_delta":
        struct.pack_into(">i", b, 23, rnd.choice((-1, -100, 0x7FFFFFFF)))
    else:  # records_garbage: the records section replaced by random bytes, counts kept
        b[61:] = rnd.randbytes(len(b) - 61)
    if what != "bad_crc" and len(b) >= 21:
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    fields = templates(reqs.topic_id, bytes(b))[0]
    req = build(0, v, fields)
    req.with_header(correlation_id=CID, client_id="fuzz")
    # Kafka accepts negative CreateTime timestamps when message.timestamp.before.max.ms is
    # unbounded (its default), and an uncompressed batch's records are checked only by
    # record-level validation: both are reported by code, not required to fail.
    expect = "any" if what in ("records_garbage", "absurd_timestamp") else "error"
    return f"batch:{what}", req.encode(header=True, framed=True), expect


def has_huge_varint(frame: bytes, floor: int = 1 << 28) -> bool:
    """Whether any 5-byte unsigned varint in the frame's body encodes >= `floor`. kio 0.6.5's
    native reader reserves memory for a compact array's declared length before reading it,
    and aborted the process when that failed, until wire/guard.py (9004939) stopped such
    frames first; --leave-out-huge-varints reproduces the earlier runs that had to skip them."""
    b = frame[4:]
    for i in range(len(b) - 4):
        if b[i] & 0x80 and b[i + 1] & 0x80 and b[i + 2] & 0x80 and b[i + 3] & 0x80 \
                and not b[i + 4] & 0x80:
            value = (b[i] & 0x7F) | (b[i + 1] & 0x7F) << 7 | (b[i + 2] & 0x7F) << 14 \
                | (b[i + 3] & 0x7F) << 21 | b[i + 4] << 28
            if value >= floor:
                return True
    return False
