# One cleaning of one partition, on a cleaner thread, as Kafka's Cleaner.doClean:
#
# 1. The offset map (cleaner_map.py) of the dirty section [first dirty, uncleanable): key ->
#    offset of its latest record, aborted transactions' records left out. When the map is
#    full, the cleaning stops at the last record it took (`end`), inside a segment or a
#    batch if need be, as Kafka's: records from `end` on stay for the next cleaning.
# 2. The segments below `end` (never the active one), from the log start, in groups whose
#    total stays under segment.bytes and the index size, each rewritten into one segment
#    (cleaner_swap.py swaps it in). What stays, batch by batch (cleaner_records.py):
#    - a record whose offset is past the map, or is its key's latest;
#    - a tombstone until the delete horizon of its batch (KIP-534) has passed;
#    - nothing of an aborted transaction; a COMMIT/ABORT marker until its transaction's data
#      is gone and then delete.retention.ms more;
#    - each producer's last batch, empty if need be (idempotence), and each group's last
#      batch (so that the cleaned segment ends where the group ended).
# The segments are read through descriptors of the cleaner's own, chunk by chunk: memory is
# the map plus one chunk (or one batch, when larger).
from __future__ import annotations

import logging
import os
import struct
import time
from collections import deque
from typing import Callable, Iterator

from ..wire.batch_builder import marker_type
from ..wire.records import CONTROL_BIT, HEADER_SIZE, TRANSACTIONAL_BIT, BatchHeader, parse_header
from . import cleaner_records as recs
from .cleaner_map import OffsetMap
from .cleaner_swap import CLEANED, seal_cleaned
from .segment import Segment, segment_name
from .txnindex import AbortedTxn

log = logging.getLogger("kafkalite.log")

CHUNK = 1 << 20
MAX_INDEX_BYTES = 10485760  # Kafka's segment.index.bytes default: a group's index bound
_PID = struct.Struct(">q")


class CleaningAborted(Exception):
    """The cleaner is stopping, or the partition changed under it."""


class Throttle:
    """log.cleaner.io.max.bytes.per.second over the bytes read and written."""

    def __init__(self, rate: float, stopping: Callable[[], bool]):
        self.rate = rate
        self.stopping = stopping
        self.start = time.monotonic()
        self.bytes = 0

    def add(self, n: int) -> None:
        if self.stopping():
            raise CleaningAborted("the cleaner is stopping")
        self.bytes += n
        if self.rate >= 1e300:
            return
        ahead = self.bytes / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(min(ahead, 1.0))


def iter_batches(path: str, size: int, throttle: Throttle) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of the first `size` bytes of a segment file, read chunk by chunk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        while pos + HEADER_SIZE <= size:
            chunk = os.pread(fd, min(CHUNK, size - pos), pos)
            throttle.add(len(chunk))
            at = 0
            while at + HEADER_SIZE <= len(chunk):
                h = parse_header(chunk, at)
                if at + h.size > len(chunk):
                    break
                yield h, chunk[at:at + h.size]
                at += h.size
            if at == 0:  # one batch larger than a chunk
                h = parse_header(chunk)
                if h.size <= 0 or pos + h.size > size:
                    raise ValueError(f"{path}: bad batch at byte {pos}")
                yield h, os.pread(fd, h.size, pos)
                at = h.size
            pos += at
    finally:
        os.close(fd)


class TxnState:
    """Kafka's CleanedTransactionMetadata: which transactional batches are aborted, and
    whether a marker's transaction still has data in the log."""

    def __init__(self, aborted: list[AbortedTxn]):
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._aborted: dict[int, list] = {}  # producer id -> [txn, data seen]
        self._committed: set[int] = set()
        self.kept_abort: AbortedTxn | None = None  # for the cleaned segment's .txnindex

    def _upto(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            t = self._pending.popleft()
            self._aborted[t.producer_id] = [t, False]

    def on_batch(self, h: BatchHeader) -> bool:
        """Whether a data batch belongs to an aborted transaction (and can go)."""
        if not h.attributes & TRANSACTIONAL_BIT:
            return False
        self._upto(h.last_offset)
        entry = self._aborted.get(h.producer_id)
        if entry is not None:
            entry[1] = True
            return True
        self._committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, kind: int) -> bool:
        """Whether a marker's transaction has no data left (the marker may go, after its
        delete horizon)."""
        self._upto(h.last_offset)
        self.kept_abort = None
        if kind == 0:
            entry = self._aborted.pop(h.producer_id, None)
            if entry is not None and entry[1]:
                self.kept_abort = entry[0]
                return False
            return True
        if kind == 1:
            seen = h.producer_id in self._committed
            self._committed.discard(h.producer_id)
            return not seen
        return False


def aborted_txns(segments: list[Segment], end: int) -> list[AbortedTxn]:
    out = []
    for seg in segments:
        if seg.txn_index.exists:
            out += [t for t in seg.txn_index.entries() if t.first_offset < end]
    return out


def producer_last_offsets(segments: list[Segment], sizes: list[int]) -> dict[int, int]:
    """Producer id -> last offset of its last batch in the log (batch headers only)."""
    last: dict[int, int] = {}
    for seg, size in zip(segments, sizes):
        fd = os.open(seg.path, os.O_RDONLY)
        try:
            pos = 0
            while pos + HEADER_SIZE <= size:
                h = parse_header(os.pread(fd, HEADER_SIZE, pos))
                if h.producer_id >= 0:
                    last[h.producer_id] = h.last_offset
                pos += h.size
        finally:
            os.close(fd)
    return last


def build_map(segments: list[Segment], first_dirty: int, uncleanable: int, omap: OffsetMap,
              txns: TxnState, throttle: Throttle) -> int:
    """Fill `omap` from the dirty section; returns the offset where it stopped."""
    end = first_dirty
    for seg in segments:
        if seg.next_offset <= first_dirty or seg.base_offset >= uncleanable:
            continue
        for h, batch in iter_batches(seg.path, seg.size, throttle):
            if h.base_offset >= uncleanable:
                return end
            if h.attributes & CONTROL_BIT:
                txns.on_marker(h, marker_type(batch))
            elif h.last_offset >= first_dirty and not txns.on_batch(h):
                _, spans = recs.record_spans(batch, h)
                for s in spans:
                    if s.key is not None and s.offset >= first_dirty:
                        if omap.free() <= 0:
                            # Full inside a batch, as Kafka's buildOffsetMapForSegment: the
                            # map covers up to its last key, so even a batch larger than the
                            # whole map is cleaned part by part and every cleaning advances.
                            return max(end, omap.latest_offset + 1)
                        omap.put(s.key, s.offset)
            end = h.last_offset + 1
    return end


def group_segments(segments: list[Segment], max_bytes: int, interval: int) -> list[list[Segment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose sizes, index sizes and offset
    span fit one segment."""
    groups: list[list[Segment]] = []
    for seg in segments:
        g = groups[-1] if groups else None
        index_bytes = lambda s: s.size // max(interval, 1) * 8 + 8  # noqa: E731
        if g is not None and sum(s.size for s in g) + seg.size <= max_bytes \
                and sum(index_bytes(s) for s in g) + index_bytes(seg) <= MAX_INDEX_BYTES \
                and seg.next_offset - 1 - g[0].base_offset <= 2**31 - 1:
            g.append(seg)
        else:
            groups.append([seg])
    return groups


class GroupCleaner:
    """The rewrite of groups of segments, with the state carried from one to the next."""

    def __init__(self, omap: OffsetMap, end: int, txns: TxnState,
                 last_of_producer: dict[int, int], now: int, delete_retention_ms: int,
                 throttle: Throttle):
        self.map = omap
        self.end = end  # the map holds every key of [first dirty, end)
        self.txns = txns
        self.last_of_producer = last_of_producer
        self.now = now
        self.retention = delete_retention_ms
        self.throttle = throttle
        self.earliest_horizon: int | None = None  # of what stays: when to clean again
        self.bytes_read = 0
        self.bytes_written = 0

    def clean(self, group: list[Segment], directory: str, interval: int) -> Segment:
        base = group[0].base_offset
        for ext in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.unlink(os.path.join(directory, segment_name(base) + ext + CLEANED))
            except FileNotFoundError:
                pass
        new = Segment(directory, base, interval, CLEANED)
        try:
            group_end = group[-1].next_offset
            for seg in group:
                for h, batch in iter_batches(seg.path, seg.size, self.throttle):
                    self.bytes_read += h.size
                    out = self.filter(h, batch, h.last_offset + 1 == group_end)
                    if out is None:
                        continue
                    oh = parse_header(out)
                    new.append(b"", out, oh.base_offset, oh.last_offset, oh.max_timestamp)
                    self.throttle.add(len(out))
                    self.bytes_written += len(out)
                    if self.txns.kept_abort is not None and oh.attributes & CONTROL_BIT:
                        new.txn_index.append(self.txns.kept_abort)
            seal_cleaned(new)
        except BaseException:
            new.delete()
            raise
        return new

    def filter(self, h: BatchHeader, batch: bytes, last_of_group: bool) -> bytes | None:
        control = bool(h.attributes & CONTROL_BIT)
        horizon = recs.delete_horizon(h)
        if control:
            can_discard = self.txns.on_marker(h, marker_type(batch))
            discard = can_discard and horizon is not None and horizon <= self.now
        else:
            self.txns.kept_abort = None
            can_discard = discard = self.txns.on_batch(h)
        retain_empty = last_of_group or (
            h.producer_id >= 0 and self.last_of_producer.get(h.producer_id) == h.last_offset)
        if discard and not retain_empty:
            return None
        if discard:
            return recs.empty_batch(h)
        if control:
            needs_horizon = can_discard and horizon is None
            if not needs_horizon:
                self._note_horizon(horizon if can_discard else None)
                return batch
            body, kept = recs.record_spans(batch, h)
        else:
            body, spans = recs.record_spans(batch, h)
            kept = [s for s in spans if self._keep(s, horizon)]
            needs_horizon = horizon is None and any(not s.has_value for s in kept)
            if len(kept) == h.records_count and not needs_horizon:
                if any(not s.has_value for s in kept):
                    self._note_horizon(horizon)
                return batch
        if not kept:
            return recs.empty_batch(h) if retain_empty else None
        new_horizon = self.now + self.retention if needs_horizon else None
        if needs_horizon or any(not s.has_value for s in kept):
            self._note_horizon(new_horizon if needs_horizon else horizon)
        return recs.rebuild(h, body, kept, new_horizon)

    def _keep(self, s: recs.RecordSpan, horizon: int | None) -> bool:
        if s.offset >= self.end:
            return True  # past the map (it filled up): Kafka's pastLatestOffset
        if s.key is None:
            return False  # refused on produce to compacted topics; Kafka drops them too
        if s.offset < self.map.get(s.key):
            return False
        return s.has_value or horizon is None or self.now < horizon

    def _note_horizon(self, horizon: int | None) -> None:
        if horizon is not None and (self.earliest_horizon is None
                                    or horizon < self.earliest_horizon):
            self.earliest_horizon = horizon
