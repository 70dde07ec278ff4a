# The leader-epoch cache of one partition and its `leader-epoch-checkpoint` file, as Kafka's
# LeaderEpochFileCache: which leader epoch began at which offset, so that OffsetForLeaderEpoch
# can say where an epoch ended (KIP-101, KIP-279) and a follower can truncate a divergent tail.
#
# The file is Kafka's text checkpoint: a version line (0), a count line, then one
# `epoch startOffset` line per entry, oldest first. The cache only computes; every change
# hands the new file content to `persist`, which the partition queues as an atomic write on
# its flusher thread (one thread, so the last change queued is the last one written).
from __future__ import annotations

import bisect
import logging
import os
from typing import Callable, Iterable

from ..fileio import atomic_write

log = logging.getLogger("kafkalite.log")

NAME = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


def parse_checkpoint(text: str) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a checkpoint's text. Raises ValueError."""
    lines = text.splitlines()
    if len(lines) < 2 or int(lines[0]) != VERSION:
        raise ValueError(f"unknown version or truncated header: {lines[:2]!r}")
    count = int(lines[1])
    entries = []
    for line in lines[2:]:
        epoch, offset = line.split()
        entries.append((int(epoch), int(offset)))
    if len(entries) != count:
        raise ValueError(f"{len(entries)} entries, {count} announced")
    return entries


def format_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    entries = list(entries)
    lines = [str(VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return ("\n".join(lines) + "\n").encode()


class LeaderEpochCache:
    """Entries (epoch, start offset), both strictly increasing."""

    def __init__(self, entries: Iterable[tuple[int, int]] = (),
                 persist: Callable[[bytes], object] | None = None):
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.persist = persist
        for epoch, start in entries:  # as Kafka loads a checkpoint: through assign
            self._assign(epoch, start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` begins at `start_offset`. The same epoch again at the same or
        a later offset changes nothing; anything else first drops the entries from the end
        that it would contradict (an epoch not below it, or a start not below it). Returns
        whether the cache changed."""
        if not self._assign(epoch, start_offset):
            return False
        self._save()
        return True

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        dropped = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            dropped.append((self._epochs.pop(), self._starts.pop()))
        if len(dropped) > 1 or (dropped and dropped[0][1] != start_offset):
            log.warning("Leader epoch entry (%d, %d) truncated conflicting entries %s",
                        epoch, start_offset, dropped)
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers: the largest epoch not above
        `requested` and the start of the next one; the latest epoch ends at the log end; an
        epoch older than every entry ends where the first entry starts (the data before is
        gone); UNDEFINED for -1 or an epoch above every entry."""
        if requested == UNDEFINED:
            return UNDEFINED, UNDEFINED
        if self._epochs and requested == self._epochs[-1]:
            return requested, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested)
        if higher == len(self._epochs):
            return UNDEFINED, UNDEFINED
        if higher == 0:
            return requested, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at `offset` was written in, UNDEFINED before the first."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs that start at or after `end_offset` (the log was truncated
        there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch in force there starts there, the
        older ones are forgotten. An entry starting after it stays."""
        gone = bisect.bisect_right(self._starts, start_offset)
        if gone == 0 or (gone == 1 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[gone - 1]
        del self._epochs[:gone], self._starts[:gone]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._save()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._save()

    def _save(self) -> None:
        if self.persist is not None:
            self.persist(format_checkpoint(self.entries))


def open_cache(directory: str, log_start: int, log_end: int, epoch: int,
               persist: Callable[[bytes], object]) -> LeaderEpochCache:
    """A partition's cache from its checkpoint (a missing or malformed one: empty), fitted
    to the log, with this broker leading at `epoch` from the log end (as Kafka on becoming
    leader). Without a checkpoint the log's batches are taken to carry `epoch` from the
    log start: a single node never wrote another. Reads and rewrites the file in place, as
    the rest of a log's opening (broker start, the metadata worker), unsynced as
    partition.metadata is: one lost or torn by a power failure is rebuilt at the next
    opening. Later changes go to `persist`."""
    path = os.path.join(directory, NAME)
    try:
        with open(path, encoding="ascii") as f:
            entries = parse_checkpoint(f.read())
    except FileNotFoundError:
        entries = []
    except (ValueError, UnicodeDecodeError) as e:
        log.warning("Ignoring malformed %s: %s", path, e)
        entries = []
    cache = LeaderEpochCache(entries)
    cache.truncate_from_end(log_end)  # a crash may have cut the log below what it knew
    cache.truncate_from_start(log_start)
    if epoch > cache.latest_epoch:  # a replica's newer epochs stay as they are
        cache.assign(epoch, log_end if cache.entries else log_start)
    if cache.entries != entries:
        atomic_write(path, format_checkpoint(cache.entries), durable=False)
    cache.persist = persist
    return cache
