"""Recompression of a produced batch into a topic's codec (kafkalite/wire/recompress.py)."""
from __future__ import annotations

import pytest

from kafkalite.wire.errors import ErrorCode, KafkaError
from kafkalite.wire.record_iter import iter_records
from kafkalite.wire.recompress import CODECS, recompress, target_codec
from kafkalite.wire.records import (TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, crc_ok,
                                    parse_header, validate_produce_batch,
                                    with_log_append_time)
from tests.helpers.kbatch import build_batch

RECS = [(b"k%d" % i, b"value-%d" % i * 20, [("h", b"x%d" % i)], 1_700_000_000_000 + i * 7)
        for i in range(12)]


def _records(batch: bytes) -> list:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)]


@pytest.mark.parametrize("src", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("dst", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_pair_keeps_records_and_header(src, dst):
    codec_in = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[src]
    batch = build_batch(RECS, codec_in, producer_id=77, producer_epoch=3, base_sequence=40)
    h = validate_produce_batch(batch, 1 << 20)
    out, nh = recompress(batch, h, CODECS[dst])
    if codec_in == CODECS[dst]:
        assert out is batch
        return
    assert nh.compression == CODECS[dst]
    assert crc_ok(out, 0, len(out)) and nh.size == len(out)
    assert validate_produce_batch(out, 1 << 20) == nh
    for field in ("base_offset", "base_timestamp", "max_timestamp", "producer_id",
                  "producer_epoch", "base_sequence", "records_count", "last_offset_delta"):
        assert getattr(nh, field) == getattr(h, field), field
    assert _records(out) == _records(batch)


def test_transactional_and_timestamp_type_bits_kept():
    batch = bytearray(build_batch(RECS, 3, producer_id=5, producer_epoch=0, base_sequence=0))
    h = parse_header(batch)
    # Set the transactional and LogAppendTime bits, then fix the CRC: as a client would send.
    attrs = h.attributes | TRANSACTIONAL_BIT
    batch[21:23] = attrs.to_bytes(2, "big")
    batch = with_log_append_time(bytes(batch), h.max_timestamp)
    h = parse_header(batch)
    out, nh = recompress(batch, h, CODECS["zstd"])
    assert nh.attributes == (h.attributes & ~7) | 4
    assert nh.attributes & TRANSACTIONAL_BIT and nh.attributes & TIMESTAMP_TYPE_BIT


def test_level_changes_the_bytes():
    recs = [(b"k", bytes(range(256)) * 40 + b"%d" % i, [], 1_700_000_000_000) for i in range(50)]
    batch = build_batch(recs, 0)
    h = parse_header(batch)
    low, _ = recompress(batch, h, CODECS["zstd"], 1)
    high, _ = recompress(batch, h, CODECS["zstd"], 19)
    assert _records(low) == _records(high) == _records(batch)
    assert low != high


def test_undecompressable_body_is_corrupt_message():
    batch = bytearray(build_batch(RECS, 1))
    batch[70:90] = b"\x00" * 20
    h = parse_header(batch)
    with pytest.raises(KafkaError) as e:
        recompress(bytes(batch), h, CODECS["zstd"])
    assert e.value.code == ErrorCode.corrupt_message


def test_target_codec_from_topic_config():
    cfg = {"compression.type": "producer", "compression.gzip.level": -1,
           "compression.lz4.level": 9, "compression.zstd.level": 3}
    assert target_codec(cfg.__getitem__) is None
    for name, expect in [("gzip", (1, None)), ("lz4", (3, 9)), ("zstd", (4, 3)),
                         ("snappy", (2, None)), ("uncompressed", (0, None))]:
        assert target_codec({**cfg, "compression.type": name}.__getitem__) == expect
    assert target_codec({**cfg, "compression.type": "gzip",
                         "compression.gzip.level": 9}.__getitem__) == (1, 9)
