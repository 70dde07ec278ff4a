# Record-level work of the log cleaner (its thread only): the records of a batch as spans
# of its decompressed body, and the batch rebuilt from the records it keeps, as Kafka's
# MemoryRecords.filterTo writes it: same base offset, producer id, epoch, base sequence and
# attributes; lastOffsetDelta and records count from the kept records; the max timestamp
# recomputed (CreateTime); compressed again with the batch's own codec. A batch that keeps
# every record and needs no delete horizon is never rebuilt (its bytes are copied).
#
# KIP-534: a batch holding a tombstone or a removable transaction marker gets a delete
# horizon (now + delete.retention.ms) the first time the cleaner keeps it: attribute bit 6,
# with the horizon as the batch's base timestamp and the records' timestamp deltas relative
# to it. A later cleaning past the horizon removes them.
from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from ..wire.batch_builder import zigzag_varint
from ..wire.primitives import read_uvarint
from ..wire.recompress import compress
from ..wire.record_iter import decompress
from ..wire.records import (CONTROL_BIT, HEADER_SIZE, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
                            BatchHeader)

DELETE_HORIZON_BIT = 0x40
_HEADER = struct.Struct(">qiibIhiqqqhii")
_AFTER_CRC_AT = 21


@dataclass(slots=True)
class RecordSpan:
    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    start: int      # the record's bytes in the decompressed body: [start, end)
    after_ts: int   # where the fields after timestampDelta start
    end: int


def _zz(buf, pos: int) -> tuple[int, int]:
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def record_spans(batch, h: BatchHeader) -> tuple[bytes, list[RecordSpan]]:
    """The decompressed records of `batch` and where each one lies in them; ValueError when
    their framing does not add up."""
    body = decompress(h.compression, bytes(batch[HEADER_SIZE:h.size]))
    log_append = h.attributes & TIMESTAMP_TYPE_BIT
    spans = []
    pos = 0
    for _ in range(h.records_count):
        start = pos
        length, pos = _zz(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise ValueError("record length runs past the batch")
        ts_delta, p = _zz(body, pos + 1)  # after the record's attributes byte
        after_ts = p
        off_delta, p = _zz(body, p)
        klen, p = _zz(body, p)
        key = None if klen < 0 else bytes(body[p:p + klen])
        p += max(klen, 0)
        vlen, p = _zz(body, p)
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        spans.append(RecordSpan(h.base_offset + off_delta, ts, key, vlen >= 0, start,
                                after_ts, end))
        pos = end
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last of {h.records_count} records")
    return body, spans


def _pack(h: BatchHeader, attributes: int, last_delta: int, base_ts: int, max_ts: int,
          count: int, records: bytes) -> bytes:
    # partitionLeaderEpoch kept (Kafka's buildRetainedRecordsInto / writeEmptyHeader): a
    # follower's leader-epoch cache learns it from the batches it fetches.
    head = bytearray(_HEADER.pack(h.base_offset, HEADER_SIZE - 12 + len(records),
                                  h.partition_leader_epoch, 2, 0,
                                  attributes, last_delta, base_ts, max_ts, h.producer_id,
                                  h.producer_epoch, h.base_sequence, count))
    crc = crc32c.crc32c(records, crc32c.crc32c(memoryview(head)[_AFTER_CRC_AT:]))
    struct.pack_into(">I", head, 17, crc)
    return bytes(head) + records


def rebuild(h: BatchHeader, body: bytes, kept: list[RecordSpan], horizon: int | None) -> bytes:
    """The batch holding only the `kept` records; with `horizon`, it carries that delete
    horizon (the kept records' timestamps are re-expressed relative to it)."""
    log_append = h.attributes & TIMESTAMP_TYPE_BIT
    attributes = h.attributes
    base_ts = h.base_timestamp
    if horizon is None:
        records = b"".join(body[s.start:s.end] for s in kept)
    else:
        attributes |= DELETE_HORIZON_BIT
        base_ts = horizon
        parts = []
        for s in kept:
            _, attrs_at = _zz(body, s.start)  # the length prefix ends at the attributes byte
            ts_field = body[attrs_at + 1:s.after_ts] if log_append \
                else zigzag_varint(s.timestamp - horizon)
            inner = body[attrs_at:attrs_at + 1] + ts_field + body[s.after_ts:s.end]
            parts.append(zigzag_varint(len(inner)) + inner)
        records = b"".join(parts)
    max_ts = h.max_timestamp if log_append else max(s.timestamp for s in kept)
    return _pack(h, attributes, kept[-1].offset - h.base_offset, base_ts, max_ts, len(kept),
                 compress(h.compression, records))


def empty_batch(h: BatchHeader) -> bytes:
    """The header alone (no records): kept for a producer's last batch, so that its
    sequence and epoch survive cleaning, as Kafka's writeEmptyHeader."""
    attributes = h.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    return _pack(h, attributes, h.last_offset_delta, h.max_timestamp, h.max_timestamp, 0, b"")


def delete_horizon(h: BatchHeader) -> int | None:
    return h.base_timestamp if h.attributes & DELETE_HORIZON_BIT else None
