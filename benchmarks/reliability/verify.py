# The model the crash and shutdown harnesses check the broker against.
#
# For each partition it keeps what has been read back so far (offset -> key, every record
# CRC-checked and byte-compared on the way in) and checks, incrementally:
#   - offsets are contiguous from the log start; no key appears twice (no duplicates);
#   - within one producer generation and partition, sequence numbers only increase
#     (acknowledged order is log order);
#   - every acknowledged record sits at the offset its delivery report gave, byte-identical;
#   - the log end offset never goes below one seen before, nor below an acknowledged offset.
# Retention: a partition flagged `retained` may lose records below its log start offset;
# only records at or above it are required, which keeps the check exact.
from __future__ import annotations

from dataclasses import dataclass, field

from .common import Conn, OffsetOutOfRange, fetch_range, list_offsets, payload
from .workers import Acked, parse_key


@dataclass
class PartitionModel:
    retained: bool = False
    view: dict[int, bytes] = field(default_factory=dict)  # offset -> key, as read back
    keys: set[bytes] = field(default_factory=set)
    last_seq: dict[str, int] = field(default_factory=dict)
    read_upto: int = 0        # everything below has been read (or deleted by retention)
    max_leo: int = 0          # highest log end offset observed
    pending: list[Acked] = field(default_factory=list)  # acked, not yet found in the log
    acked: int = 0
    verified: int = 0         # acked records found at their offset, byte-identical
    lost: int = 0
    expired: int = 0          # acked records legitimately deleted by retention


class Violation(AssertionError):
    pass


class Model:
    def __init__(self, topic: str, partitions: list[int], retained: bool = False):
        self.topic = topic
        self.parts = {p: PartitionModel(retained=retained) for p in partitions}
        self.duplicates = 0
        self.reorders = 0
        self.violations: list[str] = []

    def _fail(self, msg: str) -> None:
        self.violations.append(msg)

    def add_acks(self, acks: list[Acked]) -> None:
        for a in acks:
            pm = self.parts[a.partition]
            pm.acked += 1
            pm.pending.append(a)

    def check(self, conn: Conn) -> None:
        """Read what is new, then settle every pending acknowledgement that can be."""
        parts = list(self.parts)
        ends = list_offsets(conn, self.topic, parts, -1)
        starts = list_offsets(conn, self.topic, parts, -2)
        for p, pm in self.parts.items():
            end, start = ends[p], starts[p]
            if end < pm.max_leo:
                self._fail(f"{self.topic}-{p}: log end offset went back from {pm.max_leo} "
                           f"to {end}")
            if start > 0 and not pm.retained:
                self._fail(f"{self.topic}-{p}: log start offset moved to {start} on a topic "
                           "without retention")
            pm.max_leo = max(pm.max_leo, end)
            begin = max(pm.read_upto, start)
            if begin < end:
                for _attempt in range(5):
                    try:
                        recs = fetch_range(conn, self.topic, p, begin, end)
                        break
                    except OffsetOutOfRange:
                        if not pm.retained:
                            raise
                        # Retention moved the start meanwhile, possibly past the end read
                        # above (it may delete the active segment): take both again.
                        start = list_offsets(conn, self.topic, [p], -2)[p]
                        end = max(end, list_offsets(conn, self.topic, [p], -1)[p])
                        pm.max_leo = max(pm.max_leo, end)
                        begin = max(pm.read_upto, start)
                else:
                    raise AssertionError(f"{self.topic}-{p}: retention outran the reader")
                expect = begin
                for r in recs:
                    if r.offset != expect:
                        self._fail(f"{self.topic}-{p}: offset {r.offset} where {expect} was "
                                   "expected (gap or overlap)")
                    expect = r.offset + 1
                    self._take(p, pm, r.offset, r.key, r.value)
                if expect != end:
                    self._fail(f"{self.topic}-{p}: read up to {expect}, log end is {end}")
            pm.read_upto = max(pm.read_upto, end)
            still = []
            for a in pm.pending:
                if pm.retained and a.offset < start and a.offset not in pm.view:
                    pm.expired += 1
                elif a.offset >= end:
                    if a.offset >= pm.max_leo:
                        pm.lost += 1
                        self._fail(f"{self.topic}-{p}: acknowledged offset {a.offset} "
                                   f"({a.key!r}) is past the log end {end}")
                    else:
                        still.append(a)
                elif a.offset < pm.read_upto:
                    got = pm.view.get(a.offset)
                    if got == a.key:
                        pm.verified += 1
                    elif got is None and pm.retained and a.offset < start:
                        pm.expired += 1
                    else:
                        pm.lost += 1
                        self._fail(f"{self.topic}-{p}: acknowledged {a.key!r} at offset "
                                   f"{a.offset}, the log has {got!r} there")
                else:
                    still.append(a)
            pm.pending = still

    def _take(self, p: int, pm: PartitionModel, offset: int, key: bytes | None,
              value: bytes | None) -> None:
        if key is None:
            self._fail(f"{self.topic}-{p}@{offset}: a record without a key")
            return
        if value != payload(key):
            self._fail(f"{self.topic}-{p}@{offset}: value of {key!r} is not byte-identical")
        who, kp, seq = parse_key(key)
        if kp != p:
            self._fail(f"{self.topic}-{p}@{offset}: {key!r} belongs to partition {kp}")
        if key in pm.keys:
            self.duplicates += 1
            self._fail(f"{self.topic}-{p}@{offset}: duplicate of {key!r}")
        pm.keys.add(key)
        prev = pm.last_seq.get(who, -1)
        if seq <= prev:
            self.reorders += 1
            self._fail(f"{self.topic}-{p}@{offset}: {key!r} after sequence {prev} of {who}")
        pm.last_seq[who] = max(prev, seq)
        pm.view[offset] = key

    def reread_all(self, conn: Conn) -> None:
        """Read everything again from the log start: old data must not have changed."""
        parts = list(self.parts)
        ends = list_offsets(conn, self.topic, parts, -1)
        starts = list_offsets(conn, self.topic, parts, -2)
        for p, pm in self.parts.items():
            upto = min(ends[p], pm.read_upto)
            try:
                recs = fetch_range(conn, self.topic, p, starts[p], upto)
            except OffsetOutOfRange:
                if not pm.retained:
                    raise
                start = list_offsets(conn, self.topic, [p], -2)[p]
                recs = fetch_range(conn, self.topic, p, start, max(start, upto))
            for r in recs:
                if pm.view.get(r.offset) != r.key:
                    self._fail(f"{self.topic}-{p}@{r.offset}: now {r.key!r}, earlier "
                               f"{pm.view.get(r.offset)!r}")
                elif r.value != payload(r.key):
                    self._fail(f"{self.topic}-{p}@{r.offset}: value changed")

    def totals(self) -> dict[str, int]:
        ps = self.parts.values()
        return {"acked": sum(pm.acked for pm in ps),
                "verified": sum(pm.verified for pm in ps),
                "expired_by_retention": sum(pm.expired for pm in ps),
                "unsettled": sum(len(pm.pending) for pm in ps),
                "lost": sum(pm.lost for pm in ps),
                "duplicates": self.duplicates, "reorders": self.reorders,
                "records_in_log": sum(len(pm.view) for pm in ps)}
