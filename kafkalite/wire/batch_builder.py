# Building v2 record batches, for the broker's own writes (the group coordinator's records in
# __consumer_offsets). Uncompressed, CreateTime, no producer id: what Kafka's coordinator
# writes too. Producers' batches are never rebuilt; this is only for records the broker makes.
#
# Record layout (KIP-98): length varint | attributes i8 | timestampDelta varlong |
# offsetDelta varint | keyLength varint | key | valueLength varint | value | headers varint.
# Lengths and deltas are zigzag varints; a null key or value has length -1.
from __future__ import annotations

import struct
from typing import Iterable

import crc32c

from .primitives import uvarint
from .records import LOG_OVERHEAD

_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC = struct.Struct(">I")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1


def zigzag_varint(n: int) -> bytes:
    """Kafka's signed varint/varlong: zigzag, then the unsigned base-128 encoding."""
    return uvarint((n << 1) ^ (n >> 63))


def _field(data: bytes | None) -> bytes:
    if data is None:
        return zigzag_varint(-1)
    return zigzag_varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None) -> bytes:
    body = (b"\x00" + zigzag_varint(timestamp_delta) + zigzag_varint(offset_delta)
            + _field(key) + _field(value) + zigzag_varint(0))
    return zigzag_varint(len(body)) + body


def build_batch(records: Iterable[tuple[bytes | None, bytes | None]], timestamp_ms: int,
                base_offset: int = 0) -> bytes:
    """One uncompressed v2 batch holding (key, value) records, all stamped `timestamp_ms`."""
    encoded = [encode_record(i, 0, k, v) for i, (k, v) in enumerate(records)]
    if not encoded:
        raise ValueError("a record batch needs at least one record")
    count = len(encoded)
    tail = _AFTER_CRC.pack(0, count - 1, timestamp_ms, timestamp_ms, NO_PRODUCER_ID,
                           NO_PRODUCER_EPOCH, NO_SEQUENCE, count) + b"".join(encoded)
    crc = crc32c.crc32c(tail)
    batch_length = _PREFIX.size + _CRC.size - LOG_OVERHEAD + len(tail)
    return _PREFIX.pack(base_offset, batch_length, -1, 2) + _CRC.pack(crc) + tail
