# One share-partition's delivery state (KIP-932, Kafka 4.1's SharePartition), sans I/O.
#
# The in-flight window runs from the share-partition start offset (SPSO, `start`) to the
# next offset never acquired (`end`, one past Kafka's SPEO). It is held as contiguous,
# sorted offset ranges (Span), each with one state, one delivery count and one lock holder:
# whole batches are acquired as one span and split only where an acknowledgement or a
# re-acquisition cuts through it, so no record is ever parsed here.
#
# States (Kafka's RecordState ids): AVAILABLE -> ACQUIRED on acquisition (delivery count
# +1); ACQUIRED -> ACKNOWLEDGED (ACCEPT), ARCHIVED (REJECT, GAP), or back to AVAILABLE
# (RELEASE, lock expiry, the holder leaving) unless the delivery count reached
# group.share.delivery.count.limit, when it is ARCHIVED instead. The SPSO moves over the
# leading ACKNOWLEDGED/ARCHIVED spans, which are then forgotten. Acquisition locks run on
# the injected clock: one timer per acquisition, each span carrying its own deadline.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..clock import Clock

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
_DONE = (ACKNOWLEDGED, ARCHIVED)


class InvalidRecordState(Exception):
    """An acknowledgement of records this member does not hold (INVALID_RECORD_STATE)."""


@dataclass(slots=True)
class Span:
    first: int
    last: int
    state: int
    count: int = 0
    member: str | None = None
    deadline: int = 0

    def copy(self, first: int, last: int) -> "Span":
        return Span(first, last, self.state, self.count, self.member, self.deadline)


class SharePartition:
    """`limits()` returns (lock duration ms, max in-flight records, delivery count limit),
    read at each use so that a group config change applies to the next acquisition.
    `on_change` is called after every state change (durability hook)."""

    def __init__(self, clock: Clock, start_offset: int,
                 limits: Callable[[], tuple[int, int, int]],
                 on_change: Callable[["SharePartition"], Any] | None = None):
        self.clock = clock
        self.start = start_offset
        self.end = start_offset
        self.spans: list[Span] = []
        self.limits = limits
        self.on_change = on_change
        self._archived_now = False

    # --- queries --------------------------------------------------------------------------

    def in_flight(self) -> int:
        return self.end - self.start

    def next_fetch_offset(self) -> int | None:
        """Where a share fetch should read from: the first AVAILABLE in-flight offset, else
        `end` while the in-flight window has room; None when nothing can be acquired."""
        for s in self.spans:
            if s.state == AVAILABLE:
                return s.first
        if self.in_flight() >= self.limits()[1]:
            return None
        return self.end

    def state_of(self, offset: int) -> tuple[int, int] | None:
        """(state, delivery count) of an in-flight offset; None outside the window."""
        for s in self.spans:
            if s.first <= offset <= s.last:
                return s.state, s.count
        return None

    # --- acquisition ----------------------------------------------------------------------

    def acquire(self, member: str, batches: Iterable[tuple[int, ...]], max_records: int
                ) -> list[tuple[int, int, int]]:
        """Acquire for `member` from the log's batches [(base offset, last offset[, aborted])]
        (an aborted transaction's batch is archived, never acquired) read
        from next_fetch_offset(): AVAILABLE in-flight records first, then whole new
        batches past `end` while the window has room; at least one batch, then stopping
        once `max_records` are acquired. Returns (first, last, delivery count) ranges."""
        lock_ms, max_locks, _ = self.limits()
        deadline = self.clock.monotonic_ms() + lock_ms
        out: list[tuple[int, int, int]] = []
        taken = 0
        for base, last, *aborted in batches:
            if taken >= max_records:
                break
            if aborted and aborted[0]:
                self._archive_range(base, last)
                continue
            if base < self.end:
                for s in self._cut(max(base, self.start), min(last, self.end - 1)):
                    if s.state == AVAILABLE:
                        s.state, s.member, s.deadline = ACQUIRED, member, deadline
                        s.count += 1
                        out.append((s.first, s.last, s.count))
                        taken += s.last - s.first + 1
            if last >= self.end and self.in_flight() < max_locks:
                first = max(base, self.end)
                self.spans.append(Span(first, last, ACQUIRED, 1, member, deadline))
                self.end = last + 1
                out.append((first, last, 1))
                taken += last - first + 1
        if out:
            self.clock.call_later(lock_ms, self.expire_locks)
        if out or self._archived_now:
            self._archived_now = False
            self._advance()
            self._changed()
        return self._merge_ranges(out)

    def _archive_range(self, base: int, last: int) -> None:
        """Records of an aborted transaction (read_committed): never delivered, ARCHIVED as
        Kafka's share fetch does, AVAILABLE in-flight ones included."""
        for s in self._cut(max(base, self.start), min(last, self.end - 1)):
            if s.state == AVAILABLE:
                s.state = ARCHIVED
        if last >= self.end:
            self.spans.append(Span(max(base, self.end), last, ARCHIVED, 0))
            self.end = last + 1
        self._archived_now = True

    def move_start(self, offset: int) -> None:
        """The log no longer holds records below `offset` (retention, DeleteRecords): the
        SPSO moves up to it and the state below it is forgotten, as Kafka's
        SharePartition does when the log start offset passes it."""
        if offset <= self.start:
            return
        self._split_at(offset)
        self.spans = [s for s in self.spans if s.first >= offset]
        self.start = offset
        self.end = max(self.end, offset)
        self._advance()
        self._changed()

    @staticmethod
    def _merge_ranges(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        merged: list[tuple[int, int, int]] = []
        for first, last, count in ranges:
            if merged and merged[-1][1] + 1 == first and merged[-1][2] == count:
                merged[-1] = (merged[-1][0], last, count)
            else:
                merged.append((first, last, count))
        return merged

    def expire_locks(self) -> int:
        """Release every acquisition whose lock ran out; returns how many records."""
        now = self.clock.monotonic_ms()
        return self._release_where(lambda s: s.deadline <= now)

    def release_member(self, member: str) -> int:
        """The member left (or its share session ended): its records become AVAILABLE."""
        return self._release_where(lambda s: s.member == member)

    def _release_where(self, held: Callable[[Span], bool]) -> int:
        released = 0
        for s in self.spans:
            if s.state == ACQUIRED and held(s):
                self._release(s)
                released += s.last - s.first + 1
        if released:
            self._advance()
            self._changed()
        return released

    # --- acknowledgement ------------------------------------------------------------------

    def acknowledge(self, member: str, batches: Iterable[tuple[int, int, tuple[int, ...]]]
                    ) -> None:
        """Apply (first offset, last offset, acknowledge types) batches: one type for the
        whole range or one per offset. All are checked before any is applied, so a bad
        batch leaves the state unchanged; raises InvalidRecordState."""
        plan: list[tuple[int, int, int]] = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise InvalidRecordState(f"bad acknowledgement batch {first}-{last}")
            if any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in types):
                raise InvalidRecordState(f"bad acknowledge type in {first}-{last}")
            if first < self.start or last >= self.end:
                raise InvalidRecordState(f"offsets {first}-{last} are not in flight")
            for s in self.spans:
                if s.last >= first and s.first <= last and (
                        s.state != ACQUIRED or s.member != member):
                    raise InvalidRecordState(f"offsets {first}-{last} are not acquired "
                                             "by this member")
            if len(types) == 1:
                plan.append((first, last, types[0]))
            else:
                for i, t in enumerate(types):
                    plan.append((first + i, first + i, t))
        for first, last, ack in plan:
            for s in self._cut(first, last):
                if ack == ACCEPT:
                    s.state, s.member = ACKNOWLEDGED, None
                elif ack == RELEASE:
                    self._release(s)
                else:  # REJECT, and GAP (offsets with no record: nothing to deliver)
                    s.state, s.member = ARCHIVED, None
        if plan:
            self._advance()
            self._changed()

    # --- internals ------------------------------------------------------------------------

    def _release(self, s: Span) -> None:
        s.member = None
        s.state = ARCHIVED if s.count >= self.limits()[2] else AVAILABLE

    def _split_at(self, offset: int) -> None:
        """Make `offset` the first offset of a span (when it lies inside the window)."""
        for i, s in enumerate(self.spans):
            if s.first < offset <= s.last:
                self.spans[i:i + 1] = [s.copy(s.first, offset - 1), s.copy(offset, s.last)]
                return

    def _cut(self, first: int, last: int) -> list[Span]:
        """The spans exactly covering [first, last], splitting the ones at its edges."""
        if last < first:
            return []
        self._split_at(first)
        self._split_at(last + 1)
        return [s for s in self.spans if first <= s.first and s.last <= last]

    def _advance(self) -> None:
        drop = 0
        for s in self.spans:
            if s.state not in _DONE:
                break
            drop += 1
        if drop:
            self.start = self.spans[drop - 1].last + 1
            del self.spans[:drop]
        self._coalesce()

    def _coalesce(self) -> None:
        """Merge neighbours in the same state (and count and holder): keeps the span list
        short after per-offset acknowledgements."""
        out: list[Span] = []
        for s in self.spans:
            p = out[-1] if out else None
            if p is not None and p.state == s.state and p.count == s.count \
                    and p.member == s.member and p.deadline == s.deadline and p.last + 1 == s.first:
                p.last = s.last
            else:
                out.append(s)
        self.spans = out

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # --- durable state (Kafka's ShareSnapshot: state batches) -----------------------------

    def snapshot(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """The state to persist: SPSO and the in-flight spans as (first, last, state,
        delivery count), ACQUIRED written as AVAILABLE (a lock does not outlive the broker,
        as in Kafka)."""
        return self.start, [(s.first, s.last, AVAILABLE if s.state == ACQUIRED else s.state,
                             s.count) for s in self.spans]

    def restore(self, start: int, spans: list[tuple[int, int, int, int]]) -> None:
        self.start = start
        self.spans = [Span(f, last, st, c) for f, last, st, c in spans if last >= start]
        self.end = max(start, self.spans[-1].last + 1 if self.spans else start)
        self._advance()
