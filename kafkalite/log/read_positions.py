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

_BASE = struct.Struct(">q")
_INT = struct.Struct(">i")
LOG_OVERHEAD = 12  # base offset and batch length, before the batch's own bytes
_MIN_BATCH = 15    # up to and including lastOffsetDelta, which gives the next offset
_SLOTS = 16


def after_last_whole_batch(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(offset, byte position in `data`) of what follows the last whole batch in `data`,
    or (-1, 0) when it holds no whole batch."""
    n = len(data)
    q = 0
    next_offset = -1
    while q + LOG_OVERHEAD + _MIN_BATCH <= n:
        length = _INT.unpack_from(data, q + 8)[0]
        end = q + LOG_OVERHEAD + length
        if length < _MIN_BATCH or end > n:
            break
        next_offset = _BASE.unpack_from(data, q)[0] + _INT.unpack_from(data, q + 23)[0] + 1
        q = end
    return next_offset, q


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
