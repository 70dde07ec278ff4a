# Record batch validation on produce, with batches built by kafka-python's
# DefaultRecordBatchBuilder, and the record-level decoding used only off the hot path.
from __future__ import annotations

import struct

import pytest

from kafkalite.wire.errors import ErrorCode, KafkaError
from kafkalite.wire.record_iter import (first_record_at_or_after, iter_records,
                                        record_with_timestamp)
from kafkalite.wire.records import (HEADER_SIZE, TIMESTAMP_TYPE_BIT, crc_ok, offset_prefix,
                                    parse_header, read_offset_and_length,
                                    validate_produce_batch, with_log_append_time)

from tests.helpers.kbatch import CODECS, build_batch, decode_records, simple_batch

BIG = 1 << 30


def _code(batch: bytes, limit: int = BIG) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        validate_produce_batch(batch, limit)
    return e.value.code


@pytest.mark.parametrize("codec", CODECS.values())
def test_valid_batches_pass(codec):
    batch = build_batch([(b"k", b"v" * 500, [("a", b"1")], 1000 + i) for i in range(7)], codec)
    h = validate_produce_batch(batch, BIG)
    assert (h.records_count, h.last_offset_delta, h.magic, h.compression) == (7, 6, 2, codec)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1006)
    assert h.size == len(batch)


def test_idempotent_fields_parsed():
    h = validate_produce_batch(simple_batch(3, producer_id=77, producer_epoch=2,
                                            base_sequence=10), BIG)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 2, 10)


def test_crc_mismatch_is_corrupt_message():
    batch = bytearray(simple_batch(3))
    batch[-1] ^= 0x01  # a flipped bit in the last record
    assert _code(bytes(batch)) == ErrorCode.corrupt_message
    batch = bytearray(simple_batch(3))
    batch[23] ^= 0x40  # attributes are covered by the CRC too
    assert _code(bytes(batch)) == ErrorCode.corrupt_message


def test_offset_prefix_is_not_covered_by_crc():
    batch = bytearray(simple_batch(3))
    batch[0:16] = offset_prefix(123456, len(batch) - 12, 9)
    validate_produce_batch(bytes(batch), BIG)


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_bad_magic_is_invalid_record(magic):
    batch = bytearray(simple_batch(2))
    batch[16] = magic
    assert _code(bytes(batch)) == ErrorCode.invalid_record


def _patch(batch: bytes, fmt: str, pos: int, value: int) -> bytes:
    """Rewrite a header field and fix the CRC, so only that field is wrong."""
    import crc32c
    b = bytearray(batch)
    struct.pack_into(fmt, b, pos, value)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def test_count_mismatch_is_invalid_record():
    batch = simple_batch(3)
    assert _code(_patch(batch, ">i", 57, 4)) == ErrorCode.invalid_record   # recordsCount
    assert _code(_patch(batch, ">i", 23, 5)) == ErrorCode.invalid_record   # lastOffsetDelta
    assert _code(_patch(batch, ">i", 57, 0)) == ErrorCode.invalid_record
    assert _code(_patch(batch, ">h", 21, 0x20)) == ErrorCode.invalid_record  # control batch
    assert _code(_patch(batch, ">h", 21, 0x07)) == ErrorCode.invalid_record  # codec 7


def test_too_large_is_message_too_large():
    batch = simple_batch(5, size=1000)
    validate_produce_batch(batch, len(batch))
    assert _code(batch, len(batch) - 1) == ErrorCode.message_too_large


def test_framing_errors():
    batch = simple_batch(2)
    assert _code(batch[:HEADER_SIZE - 1]) == ErrorCode.corrupt_message
    assert _code(batch[:-3]) == ErrorCode.corrupt_message  # batchLength past the end
    # Two batches in one partition's records: Produce v3+ allows exactly one.
    assert _code(batch + batch) == ErrorCode.invalid_record
    assert _code(_patch(batch, ">i", 8, 10)) == ErrorCode.corrupt_message  # batchLength < 49


def test_log_append_time_rewrite_keeps_batch_valid():
    batch = simple_batch(3)
    out = with_log_append_time(batch, 1_800_000_000_000)
    h = validate_produce_batch(out, BIG)
    assert h.attributes & TIMESTAMP_TYPE_BIT and h.max_timestamp == 1_800_000_000_000
    # Every record now reports the append time; kafka-python agrees.
    assert [r[1] for r in decode_records(out)] == [1_800_000_000_000] * 3
    assert [r.timestamp for r in iter_records(out)] == [1_800_000_000_000] * 3
    assert out[HEADER_SIZE:] == batch[HEADER_SIZE:]


@pytest.mark.parametrize("codec", CODECS.values())
def test_iter_records_matches_kafka_python(codec):
    recs = [(None, b"x" * 300, [], 5000), (b"key", None, [("h1", b"a"), ("h2", None)], 4000),
            (b"", b"", [], 6000)]
    batch = build_batch(recs, codec)
    ours = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)]
    theirs = [(o, t, k, v, h) for o, t, k, v, h in decode_records(batch)]
    assert ours == theirs
    assert first_record_at_or_after(batch, 4500, 0) == (0, 5000)
    assert first_record_at_or_after(batch, 5500, 0) == (2, 6000)
    assert first_record_at_or_after(batch, 4000, 1) == (1, 4000)
    assert first_record_at_or_after(batch, 6001, 0) is None
    assert record_with_timestamp(batch, 6000) == (2, 6000)


def test_crc_and_prefix_helpers():
    batch = simple_batch(2)
    assert crc_ok(b"junk" + batch, 4, len(batch))
    assert read_offset_and_length(batch) == (0, len(batch))
    assert parse_header(batch).batch_length == len(batch) - 12
