# Shared pieces of the client matrix (test_client_*.py): the sample records every client
# produces and reads back, and a raw look at what the broker stored, so a test can tell the
# broker's part from the client's (e.g. that a batch is kept with the producer's codec).
#
# Kafka facts relied on: the default topic compression.type is "producer", so batches are stored
# with the codec they were produced with (LogValidator keeps them as they are); an idempotent
# producer's batches carry its producer id and per-partition sequences from 0 (KIP-98).
from __future__ import annotations

import os
import time
from typing import Any, Callable

from kafka.record.memory_records import MemoryRecords

from compat_tests.protocol_cases import fetch_fields

# (key, value, headers): keys and headers, null keys and values, empty values and keys,
# repeated and empty header values.
SAMPLES: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
    (b"key-0", b"value-0", [("h1", b"a"), ("h2", b"b")]),
    (None, b"null-key", []),
    (b"tombstone", None, []),
    (b"empty-value", b"", [("dup", b"1"), ("dup", b"2")]),
    (b"", b"empty-key", [("empty", b"")]),
    (None, None, []),
    (b"\x00\xff binary", bytes(range(256)), [("bin", b"\x00\x01")]),
]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ONE_MB = 1024 * 1024
BIG_TOPIC_CONFIG = {"max.message.bytes": str(2 * ONE_MB)}


def big_value() -> bytes:
    """1 MiB that does not compress away."""
    return os.urandom(ONE_MB)


def norm_headers(headers: Any) -> list[tuple[str, bytes]]:
    return [(k, bytes(v) if v is not None else b"") for k, v in (headers or [])]


def stored_batches(target, topic: str, partition: int = 0) -> list[Any]:
    """Every record batch of the partition, as the broker hands it out (raw Fetch)."""
    v = target.version(1)
    tid = target.metadata([topic]).topics[0].topic_id if v >= 13 else None
    out, offset = [], 0
    for _ in range(100):
        fields = fetch_fields(topic, tid, offset, max_wait=0)
        fields["topics"][0]["partitions"][0]["partition"] = partition
        resp = target.call(1, fields, v)
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0, part
        recs = MemoryRecords(bytes(part.records or b""))
        got = 0
        while (b := recs.next_batch()) is not None:
            if b.next_offset > offset:
                out.append(b)
                got += 1
            offset = max(offset, b.next_offset)
        if not got or offset >= part.high_watermark:
            return out
    raise AssertionError("too many fetches")


def wait_for(what: str, cond: Callable[[], Any], timeout: float = 20.0,
             step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(step)


# A record that compresses well, so a client that skips compression when it does not pay
# (librdkafka does, per batch) still compresses the batches that carry it.
COMPRESSIBLE = (b"compressible", b"abcdefgh" * 512, [])


def assert_stored_codec(target, topic: str, codec: str) -> None:
    """Batches are stored with the codec the producer used (compression.type=producer)."""
    codecs = {b.compression_type for b in stored_batches(target, topic)}
    assert CODECS[codec] in codecs and codecs <= {0, CODECS[codec]}, codecs


IDEMPOTENT_RECORDS = [(b"k%d" % i, b"v%d" % i, []) for i in range(15)]

# Consumer settings the three Python-API clients share (kafka-python's names, which aiokafka
# reuses): short timeouts so group tests stay quick, and a fetch that does not idle long.
CONSUMER_TIMEOUTS = {"request_timeout_ms": 15000, "session_timeout_ms": 10000,
                     "heartbeat_interval_ms": 500, "fetch_max_wait_ms": 100}


def assert_idempotent_batches(target, topic: str, partition: int) -> None:
    """One producer id, and sequences running on from 0 without gaps (KIP-98)."""
    batches = stored_batches(target, topic, partition)
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    seq = 0
    for b in batches:
        assert b.base_sequence == seq, "sequences must run on from 0 without gaps"
        seq += b.last_offset_delta + 1
