# Timestamp lookups of a partition (ListOffsets by time, and -3 the largest timestamp),
# which may read cold segments: the time index of a rolled segment, the offset index, the
# batch headers after the index hint, and the one batch decoded to find the record.
#
# On the event loop they read with nowait (reads.py): data in the page cache is served at
# once; a range that is not raises WouldBlock, a worker thread reads it (a window ahead of
# it, since the scan goes on through the following headers) and the lookup starts again.
# Each retry only re-reads what is now cached. Only the one batch that holds the answer is
# decoded; everything else is a header read.
from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from ..wire.record_iter import first_record_at_or_after, record_with_timestamp
from ..wire.records import HEADER_SIZE, LOG_OVERHEAD
from .reads import WouldBlock

if TYPE_CHECKING:
    from .partition import PartitionLog
    from .segment import Segment

T = TypeVar("T")
_LENGTH = struct.Struct(">i")  # batch length, after the 8-byte base offset
_MAXTS = struct.Struct(">q")  # max timestamp, at byte 35 of a batch header
_WARM = 1 << 20  # read ahead of a range that would block: the headers that follow it
_TRIES = 16  # warmings per lookup before the last, blocking attempt


def _batches_from(seg: "Segment", timestamp: int, nowait: bool) -> Iterator[bytes]:
    """The batches of `seg` whose max timestamp is >= `timestamp`, from the time-index
    hint on."""
    if nowait and not seg.time_index.loaded:
        seg.time_index.load(nowait=True)  # a rolled segment's index is read on demand
    found = seg.find(seg.time_index.lookup(timestamp), nowait)
    if found is None:
        return
    pos = found[0]
    while pos + HEADER_SIZE <= seg.size:
        head = seg.read(pos, HEADER_SIZE, nowait)
        size = LOG_OVERHEAD + _LENGTH.unpack_from(head, 8)[0]
        if _MAXTS.unpack_from(head, 35)[0] >= timestamp:
            yield bytes(seg.read(pos, size, nowait))
        pos += size


def offset_for_timestamp(p: "PartitionLog", timestamp: int, nowait: bool = False
                         ) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
    for seg in p.segments:
        if seg.max_timestamp < timestamp:
            continue
        for batch in _batches_from(seg, timestamp, nowait):
            hit = first_record_at_or_after(batch, timestamp, p.log_start_offset)
            if hit is not None:
                return hit
    return None


def max_timestamp_offset(p: "PartitionLog", nowait: bool = False) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record carrying the log's largest timestamp."""
    best = None
    for seg in p.segments:
        if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
            best = seg
    if best is None or best.max_timestamp < 0:
        return None
    for batch in _batches_from(best, best.max_timestamp, nowait):
        hit = record_with_timestamp(batch, best.max_timestamp)
        if hit is not None:
            return hit
    return None


async def without_waiting(lookup: Callable[..., T], *args: Any) -> T:
    """`lookup(*args, nowait=True)`, the ranges it would block on read into the page cache
    by a worker thread in between. Raises what the lookup raises (StorageError, ...)."""
    loop = asyncio.get_running_loop()
    for _ in range(_TRIES):
        try:
            return lookup(*args, nowait=True)
        except WouldBlock as wb:
            await loop.run_in_executor(None, _warm, wb)
    # Evicted again before each retry could use it (memory pressure): as reads.py does.
    return lookup(*args)


def _warm(wb: WouldBlock) -> None:
    wb.length = max(wb.length, _WARM)  # a read past the end of the file is only short
    wb.warm()
