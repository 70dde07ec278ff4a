# Where recent reads of a partition ended, so a consumer's next fetch skips the index lookup.
#
# A consumer's next fetch asks for exactly the offset after the last whole batch it got. So
# after each read, the position of the batch that follows the last whole one is remembered,
# keyed by its offset: the next fetch at that offset reads from there, with no index lookup
# and no 16 KiB header-scan window. Finding it walks the batch prefixes of what was read
# (per batch, never per record). A few entries per partition: a few consumers' positions.
from __future__ import annotations

import struct
from typing import Any

_PREFIX = struct.Struct(">qi")  # base offset, batch length
_INT = struct.Struct(">i")
LOG_OVERHEAD = 12  # base offset and batch length, before the batch's own bytes
_MIN_BATCH = 15    # up to and including lastOffsetDelta, which gives the next offset
_DELTA_AT = 23     # lastOffsetDelta's position in a batch
_SLOTS = 16


def walk_batches(data: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """One walk of the batch prefixes in `data` (per batch, never per record), for both
    of its readers: (offset after the last whole batch, byte position after it, offset
    after the last batch even if cut short). The offsets are -1 when there is no such
    batch. A batch cut before its lastOffsetDelta counts as ending after its base offset,
    as Kafka's fetchUpperBoundOffset takes the next batch's base offset."""
    n = len(data)
    q = 0
    whole, whole_end, upper = -1, 0, -1
    while q + LOG_OVERHEAD <= n:
        base, length = _PREFIX.unpack_from(data, q)
        if q + LOG_OVERHEAD + _MIN_BATCH > n:
            return whole, whole_end, base + 1
        if length < _MIN_BATCH:  # damaged: nothing after it is a batch
            break
        upper = base + _INT.unpack_from(data, q + _DELTA_AT)[0] + 1
        q += LOG_OVERHEAD + length
        if q <= n:
            whole, whole_end = upper, q
    return whole, whole_end, upper


def after_last_whole_batch(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(offset, byte position in `data`) of what follows the last whole batch in `data`,
    or (-1, 0) when it holds no whole batch."""
    whole, whole_end, _upper = walk_batches(data)
    return whole, whole_end


def first_batch_size(prefix: bytes | bytearray) -> int:
    """The whole size of the batch whose first 12 bytes are `prefix`."""
    return LOG_OVERHEAD + _INT.unpack_from(prefix, 8)[0]


class ReadPositions:
    """next offset -> (segment, byte position), the oldest forgotten first."""

    __slots__ = ("_slots",)

    def __init__(self) -> None:
        self._slots: dict[int, tuple[Any, int]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def get(self, offset: int) -> tuple[Any, int] | None:
        return self._slots.get(offset)

    def remember(self, segment: Any, position: int, data: bytes | bytearray) -> None:
        """After `data` was read from `segment` at `position`."""
        next_offset, consumed = after_last_whole_batch(data)
        if next_offset < 0:
            return
        slots = self._slots
        if len(slots) >= _SLOTS and next_offset not in slots:
            del slots[next(iter(slots))]
        slots[next_offset] = (segment, position + consumed)
