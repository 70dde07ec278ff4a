# The transactional side of a partition's log (PartitionLog inherits it): the last stable
# offset, the aborted transactions of its segments' `.txnindex` files, and the batch walks
# that the producer state replays at start (markers need their control type).
#
# The LSO is the first offset of the oldest ongoing transaction, which the producer state
# keeps (`producer_state.first_unstable`, None when none is open: then the LSO is the high
# watermark, with no other work), never above the high watermark nor below the log start.
from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Iterator

from ..wire.batch_builder import marker_type
from ..wire.records import CONTROL_BIT, HEADER_SIZE, BatchHeader, parse_header
from .errors import storage_error
from .txnindex import AbortedTxn

if TYPE_CHECKING:
    from .segment import Segment


class TransactionalLog:
    segments: list["Segment"]
    _bases: list[int]
    producer_state: object | None
    log_start_offset: int
    log_end_offset: int
    high_watermark: int

    def iter_batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of every batch ending at or after `from_offset` (state rebuilds)."""
        for _seg, _pos, h in self._headers(from_offset):
            yield h

    def _headers(self, from_offset: int) -> Iterator[tuple["Segment", int, BatchHeader]]:
        i = max(bisect_right(self._bases, from_offset) - 1, 0)
        for seg in self.segments[i:]:
            found = seg.find(from_offset)
            pos = found[0] if found else seg.size
            while pos + HEADER_SIZE <= seg.size:
                h = parse_header(seg.read(pos, HEADER_SIZE))
                yield seg, pos, h
                pos += h.size

    @property
    def last_stable_offset(self) -> int:
        first = getattr(self.producer_state, "first_unstable", None)
        if first is None:
            return self.high_watermark
        return max(min(first, self.high_watermark), self.log_start_offset)

    def may_have_aborted(self, fetch_offset: int) -> bool:
        """Whether a segment from the one holding `fetch_offset` on has a .txnindex (a
        cached flag per segment: a log without aborts answers without further work)."""
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        return any(seg.txn_index.exists for seg in self.segments[i:])

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), from the
        segment holding `fetch_offset` on, as Kafka's collectAbortedTransactions."""
        out: list[AbortedTxn] = []
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        for seg in self.segments[i:]:
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out += found
            if complete:
                break
        return out

    def append_aborted(self, producer_id: int, first_offset: int, last_offset: int,
                       last_stable_offset: int) -> None:
        """Index an aborted transaction in the segment holding its marker (`last_offset`).
        Raises StorageError."""
        txn = AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset)
        seg = self.segments[max(bisect_right(self._bases, txn.last_offset) - 1, 0)]
        try:
            seg.txn_index.append(txn)
        except OSError as e:
            raise storage_error(e, f"{seg.txn_index.path}") from e

    def iter_state_batches(self, from_offset: int) -> Iterator[tuple[BatchHeader, int]]:
        """As iter_batch_headers, with each batch's control type (0 ABORT, 1 COMMIT; -1 for
        data): a control batch, a few dozen bytes, is read whole."""
        for seg, pos, h in self._headers(from_offset):
            yield h, (marker_type(seg.read(pos, h.size)) if h.attributes & CONTROL_BIT
                      else -1)

