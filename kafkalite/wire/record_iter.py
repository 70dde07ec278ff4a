# Record-level decoding of a v2 batch. Not used on the fetch path, nor on the produce path
# except where Kafka itself looks inside batches there (compacted topics' keys, and
# kafkalite.produce.validate.records); also ListOffsets by timestamp (the exact first record
# at or after a time), dump-log, and tests.
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import cramjam

from .records import HEADER_SIZE, TIMESTAMP_TYPE_BIT, BatchHeader, parse_header
from .primitives import read_uvarint

_XERIAL = b"\x82SNAPPY\x00"
_I32 = struct.Struct(">i")


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag-encoded varint (record fields)."""
    result, pos = read_uvarint(buf, pos)
    return (result >> 1) ^ -(result & 1), pos


def _bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("record field runs past the batch")
    return bytes(buf[pos:pos + n]), pos + n


def _unxerial(data: bytes) -> bytes:
    out = bytearray()
    pos = 16
    while pos < len(data):
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        out += bytes(cramjam.snappy.decompress_raw(data[pos:pos + n]))
        pos += n
    return bytes(out)


def decompress(codec: int, data: bytes) -> bytes:
    """The records of a batch body; ValueError if they do not decompress."""
    try:
        return _decompress(codec, data)
    except ValueError:
        raise
    except Exception as e:  # cramjam.DecompressionError and friends
        raise ValueError(f"{e.__class__.__name__}: {e}") from None


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        if data.startswith(_XERIAL):
            return _unxerial(data)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _records_body(batch: bytes) -> tuple[BatchHeader, bytes, bool]:
    """The batch's header, its decompressed records, and whether it is LogAppendTime."""
    h = parse_header(batch)
    body = decompress(h.compression, bytes(batch[HEADER_SIZE:h.size]))
    return h, body, bool(h.attributes & TIMESTAMP_TYPE_BIT)


def iter_records(batch: bytes) -> Iterator[Record]:
    """Records of one v2 batch (base offset and timestamps as stored in the batch)."""
    h, body, log_append = _records_body(batch)
    pos = 0
    for _ in range(h.records_count):
        length, pos = _varint(body, pos)
        end = pos + length
        pos += 1  # record attributes, unused
        ts_delta, pos = _varint(body, pos)
        off_delta, pos = _varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        nh, pos = _varint(body, pos)
        headers = []
        for _h in range(nh):
            hk, pos = _bytes(body, pos)
            hv, pos = _bytes(body, pos)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if pos != end:
            raise ValueError("record length does not match its fields")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        yield Record(h.base_offset + off_delta, ts, key, value, headers)
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last of {h.records_count} records")


def scan_records(batch: bytes) -> Iterator[tuple[int, int, bool]]:
    """(offset delta, timestamp, has a key) of each record, skipping values and headers; a
    cheaper walk than iter_records for checks that need no more. ValueError if the records'
    framing does not add up."""
    h, body, log_append = _records_body(batch)
    pos = 0
    for _ in range(h.records_count):
        length, pos = _varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise ValueError("record length runs past the batch")
        ts_delta, p = _varint(body, pos + 1)  # after the record attributes
        off_delta, p = _varint(body, p)
        key_len, p = _varint(body, p)
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        yield off_delta, ts, key_len >= 0
        pos = end
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last of {h.records_count} records")


def first_record_at_or_after(batch: bytes, timestamp: int,
                             min_offset: int) -> tuple[int, int] | None:
    for r in iter_records(batch):
        if r.timestamp >= timestamp and r.offset >= min_offset:
            return r.offset, r.timestamp
    return None


def record_with_timestamp(batch: bytes, timestamp: int) -> tuple[int, int] | None:
    for r in iter_records(batch):
        if r.timestamp == timestamp:
            return r.offset, r.timestamp
    return None
