# Building v2 record batches, for the broker's own writes (the group coordinator's records in
# __consumer_offsets; transaction markers). Uncompressed, CreateTime; no producer id except
# in a marker, which carries the transaction's. Producers' batches are never rebuilt.
#
# Record layout (KIP-98): length varint | attributes i8 | timestampDelta varlong |
# offsetDelta varint | keyLength varint | key | valueLength varint | value | headers varint.
# Lengths and deltas are zigzag varints; a null key or value has length -1.
from __future__ import annotations

import struct
from typing import Iterable

import crc32c

from .primitives import uvarint
from .record_iter import iter_records
from .records import CONTROL_BIT, LOG_OVERHEAD, TRANSACTIONAL_BIT

_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC = struct.Struct(">I")
_MARKER_KEY = struct.Struct(">hh")    # version 0, type (0 ABORT, 1 COMMIT)
_MARKER_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch

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
                base_offset: int = 0, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, attributes: int = 0) -> bytes:
    """One uncompressed v2 batch holding (key, value) records, all stamped `timestamp_ms`."""
    encoded = [encode_record(i, 0, k, v) for i, (k, v) in enumerate(records)]
    if not encoded:
        raise ValueError("a record batch needs at least one record")
    count = len(encoded)
    tail = _AFTER_CRC.pack(attributes, count - 1, timestamp_ms, timestamp_ms, producer_id,
                           producer_epoch, NO_SEQUENCE, count) + b"".join(encoded)
    crc = crc32c.crc32c(tail)
    batch_length = _PREFIX.size + _CRC.size - LOG_OVERHEAD + len(tail)
    return _PREFIX.pack(base_offset, batch_length, -1, 2) + _CRC.pack(crc) + tail


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytes:
    """Kafka's EndTransactionMarker: a control + transactional batch with one record, key
    (version 0, type 1 COMMIT / 0 ABORT), value (version 0, coordinator epoch); base
    sequence -1."""
    return build_batch([(_MARKER_KEY.pack(0, 1 if commit else 0),
                         _MARKER_VALUE.pack(0, coordinator_epoch))], timestamp_ms,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       attributes=TRANSACTIONAL_BIT | CONTROL_BIT)


def marker_type(batch: bytes) -> int:
    """The control type (0 ABORT, 1 COMMIT) of a whole control batch; -1 if its key is not
    a marker's (Kafka's ControlRecordType.UNKNOWN)."""
    for record in iter_records(batch):
        key = record.key
        return _MARKER_KEY.unpack(key)[1] if key is not None and len(key) == 4 else -1
    return -1
