# Record batch (magic v2) header parsing and validation. Records are never decoded: a batch
# is checked through its 61-byte header and its CRC32C, then stored as the producer sent it.
#
# Layout: baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
# attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
# producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records...
# The CRC covers attributes..end, so assigning offsets (rewriting the first 16 bytes) needs
# no new CRC; rewriting maxTimestamp for LogAppendTime does.
from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from .errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qii")
_LEN_AT_8 = struct.Struct(">qi")
_MAXTS = struct.Struct(">q")
_ATTR = struct.Struct(">h")
_CRC = struct.Struct(">I")

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & 0x07


def parse_header(buf, pos: int = 0) -> BatchHeader:
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def crc_ok(buf, pos: int, size: int) -> bool:
    view = memoryview(buf)[pos + 21:pos + size]
    stored = _CRC.unpack_from(buf, pos + 17)[0]
    return crc32c.crc32c(view) == stored


def validate_produce_batch(records: bytes, max_message_bytes: int) -> BatchHeader:
    """Validate the records of one produce partition: exactly one v2 batch (Produce v3+).

    Raises KafkaError with the code Apache Kafka answers: CORRUPT_MESSAGE for framing or CRC
    damage, INVALID_RECORD for wrong magic or inconsistent counts, MESSAGE_TOO_LARGE.
    """
    n = len(records)
    if n < HEADER_SIZE:
        raise KafkaError(ErrorCode.corrupt_message, f"record batch truncated ({n} bytes)")
    h = parse_header(records)
    if h.magic != 2:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Produce v3+ requires magic v2 record batches, got magic {h.magic}")
    if h.batch_length < MIN_BATCH_LENGTH or h.size > n:
        raise KafkaError(ErrorCode.corrupt_message,
                         f"batch length {h.batch_length} does not fit {n} bytes")
    if h.size != n:
        raise KafkaError(ErrorCode.invalid_record,
                         "Produce v3+ requires exactly one record batch per partition")
    if n > max_message_bytes:
        raise KafkaError(ErrorCode.message_too_large,
                         f"batch of {n} bytes exceeds max.message.bytes {max_message_bytes}")
    if not crc_ok(records, 0, n):
        raise KafkaError(ErrorCode.corrupt_message, "record batch CRC32C mismatch")
    if h.compression not in COMPRESSION_NAMES:
        raise KafkaError(ErrorCode.invalid_record, f"unknown compression codec {h.compression}")
    if h.records_count <= 0 or h.last_offset_delta < 0 \
            or h.last_offset_delta + 1 != h.records_count:
        raise KafkaError(ErrorCode.invalid_record,
                         f"inconsistent batch: {h.records_count} records, "
                         f"lastOffsetDelta {h.last_offset_delta}")
    if h.attributes & CONTROL_BIT:
        raise KafkaError(ErrorCode.invalid_record, "clients may not send control batches")
    return h


def offset_prefix(base_offset: int, batch_length: int, leader_epoch: int) -> bytes:
    """The 16 bytes that replace a batch's baseOffset, batchLength and partitionLeaderEpoch."""
    return _PREFIX.pack(base_offset, batch_length, leader_epoch)


def with_log_append_time(batch: bytes, now_ms: int) -> bytes:
    """Copy of `batch` with LogAppendTime set (attributes bit 3, maxTimestamp) and a new CRC."""
    b = bytearray(batch)
    attrs = _ATTR.unpack_from(b, 21)[0] | TIMESTAMP_TYPE_BIT
    _ATTR.pack_into(b, 21, attrs)
    _MAXTS.pack_into(b, 35, now_ms)
    _CRC.pack_into(b, 17, crc32c.crc32c(memoryview(b)[21:]))
    return bytes(b)


def read_offset_and_length(buf, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, total batch size) from the first 12 bytes at pos."""
    base, length = _LEN_AT_8.unpack_from(buf, pos)
    return base, LOG_OVERHEAD + length
