# A topic's compression.type applied to a produced batch, as Kafka's LogValidator applies it:
# a batch whose codec differs from the topic's is decompressed and written again with the
# topic's codec (and its compression.<codec>.level); one already in that codec is stored as
# sent. `producer` (no target) keeps every batch's own codec.
#
# The v2 record format keeps each record's offset and timestamp as deltas from the batch
# header, so the decompressed records are compressed again as they are, without decoding
# each one: the new batch keeps base offset, base/max timestamps, producer id, epoch, base
# sequence, records count and the attribute bits other than the codec (timestamp type,
# transactional), as Kafka's MemoryRecordsBuilder writes them. Only the codec bits, the
# batch length and the CRC change.
from __future__ import annotations

import struct
from typing import Any, Callable

import cramjam
import crc32c

from .errors import ErrorCode, KafkaError
from .record_iter import decompress
from .records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_CODEC_BITS = 0x07
_LEN = struct.Struct(">i")
_ATTR = struct.Struct(">h")
_CRC = struct.Struct(">I")


def target_codec(config: Callable[[str], Any]) -> tuple[int, int | None] | None:
    """(codec id, level) for a topic whose effective config values `config(name)` gives;
    None for compression.type=producer. gzip's level -1 is zlib's default (6), as Java's
    Deflater.DEFAULT_COMPRESSION."""
    name = config("compression.type")
    codec = CODECS.get(name)
    if codec is None:
        return None
    if name in ("uncompressed", "snappy"):
        return codec, None
    level = config(f"compression.{name}.level")
    return codec, None if level == -1 else level


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed with `codec` (0: as it is). Snappy is raw (no xerial framing), as
    librdkafka writes it; every client reads both."""
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data, level=level))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def recompress(batch: bytes, h: BatchHeader, codec: int,
               level: int | None = None) -> tuple[bytes, BatchHeader]:
    """`batch` with its records in `codec`, and the new header; the same bytes when the
    batch is already in that codec. A body that does not decompress is CORRUPT_MESSAGE."""
    if h.compression == codec:
        return batch, h
    try:
        records = decompress(h.compression, bytes(batch[HEADER_SIZE:h.size]))
    except ValueError as e:
        raise KafkaError(ErrorCode.corrupt_message, f"cannot decompress records: {e}") from None
    body = compress(codec, records, level)
    out = bytearray(batch[:HEADER_SIZE])
    out += body
    _LEN.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _ATTR.pack_into(out, 21, (h.attributes & ~_CODEC_BITS) | codec)
    _CRC.pack_into(out, 17, crc32c.crc32c(memoryview(out)[21:]))
    new = bytes(out)
    return new, parse_header(new)
