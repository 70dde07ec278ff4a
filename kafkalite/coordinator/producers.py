# Idempotent producers: producer-id allocation and per-partition sequence checks.
#
# As Kafka's ProducerStateManager: each partition remembers, per producer id, its epoch, the
# max timestamp of its last batch and its last five batches' (first seq, last seq, base
# offset). A retried batch that matches one of them is a duplicate and is acknowledged with
# its original offset; a gap or reordering is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is
# INVALID_PRODUCER_EPOCH; a producer this partition has no state for may start at any
# sequence (KIP-360: its state may have expired). Sequences wrap from 2^31-1 to 0.
#
# Transactions, as Kafka's ProducerAppendInfo: a producer's first transactional batch in the
# partition opens its transaction there (`ongoing`: producer id -> first offset, in offset
# order, so the oldest is the first entry and the LSO costs nothing to read); its COMMIT or
# ABORT marker closes it. A partition that never sees a transactional batch keeps `ongoing`
# empty and `first_unstable` None.
#
# Expiry (producer.id.expiration.ms): a producer whose last batch's timestamp is that old is
# forgotten, as Kafka's removeExpiredProducers, unless its transaction is still open.
#
# Persistence, as Kafka: a snapshot file (producer_snapshot.py, Kafka's format) at each roll
# and at clean shutdown holds each producer's last batch only; at start the newest usable
# snapshot is loaded and the batch headers after it are replayed. So after a restart the
# newest batch of each producer, and every batch of the replayed tail, is recognised as a
# duplicate; an older retried batch gets OUT_OF_ORDER_SEQUENCE_NUMBER, as from Kafka.
from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import struct
from typing import Awaitable, Callable, Iterable, Iterator

from ..fileio import atomic_write
from ..wire.errors import ErrorCode, KafkaError
from . import producer_snapshot as snap

log = logging.getLogger("kafkalite.producers")

INT32_MAX = 2**31 - 1
CACHED_BATCHES = 5
_BATCH = struct.Struct("=iiq")  # first sequence, last sequence, base offset
_RING = CACHED_BATCHES * _BATCH.size


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def _last_seq(base_seq: int, last_delta: int) -> int:
    s = base_seq + last_delta
    return s - INT32_MAX - 1 if s > INT32_MAX else s


class ProducerEntry:
    """One producer's state in one partition. The cached batches are packed in one bytes
    object, oldest first: a few hundred bytes per producer, where a deque of tuples of ints
    took 1.7 KB. Never modified once made (an update replaces it), so a copy of the dict of
    entries is a consistent snapshot that another thread can encode."""

    __slots__ = ("epoch", "timestamp", "batches", "coordinator_epoch")

    def __init__(self, epoch: int, timestamp: int, batches: bytes = b"",
                 coordinator_epoch: int = -1):
        self.epoch = epoch
        self.timestamp = timestamp
        self.batches = batches
        self.coordinator_epoch = coordinator_epoch  # of its last marker here

    def cached(self) -> Iterator[tuple[int, int, int]]:
        """(first seq, last seq, base offset) of each cached batch, oldest first."""
        return _BATCH.iter_unpack(self.batches)

    def last_batch(self) -> tuple[int, int, int] | None:
        b = self.batches
        return _BATCH.unpack_from(b, len(b) - _BATCH.size) if b else None

    @property
    def last_seq(self) -> int:
        last = self.last_batch()
        return last[1] if last else -1


class PartitionProducers:
    """Producer state of one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.snapshots: list[int] = []  # offsets of this partition's snapshot files, ascending
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.first_unstable: int | None = None  # the oldest of those (read as the LSO)

    def check(self, pid: int, epoch: int, base_seq: int, last_delta: int) -> int | None:
        """Validate a batch before append; returns the original base offset of a duplicate,
        None for a new batch; raises KafkaError otherwise."""
        e = self.producers.get(pid)
        if e is None:
            return None
        if epoch < e.epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"Producer {pid}'s epoch {epoch} is older than {e.epoch}")
        if epoch > e.epoch:
            if base_seq != 0:
                raise KafkaError(ErrorCode.out_of_order_sequence_number,
                                 f"Invalid sequence {base_seq} for new epoch {epoch} of "
                                 f"producer {pid}: expected 0")
            return None
        current = e.last_seq
        if base_seq == _next_seq(current):
            return None  # the common case; five cached batches never span 2^31 sequences
        last = _last_seq(base_seq, last_delta)
        for first_s, last_s, base_off in e.cached():
            if first_s == base_seq and last_s == last:
                return base_off
        raise KafkaError(ErrorCode.out_of_order_sequence_number,
                         f"Out of order sequence number for producer {pid}: {base_seq} "
                         f"(incoming), {current} (current end sequence)")

    def update(self, pid: int, epoch: int, base_seq: int, last_delta: int, base_offset: int,
               timestamp: int) -> None:
        """Record an appended batch; `timestamp` is its max timestamp, as stored."""
        packed = _BATCH.pack(base_seq, _last_seq(base_seq, last_delta), base_offset)
        e = self.producers.get(pid)
        if e is None or epoch != e.epoch:
            self.producers[pid] = ProducerEntry(
                epoch, timestamp, packed, -1 if e is None else e.coordinator_epoch)
            return
        b = e.batches
        self.producers[pid] = ProducerEntry(
            epoch, timestamp, (b[_BATCH.size:] if len(b) >= _RING else b) + packed,
            e.coordinator_epoch)

    # --- transactions ---------------------------------------------------------------------

    def check_not_in_txn(self, pid: int) -> None:
        """A non-transactional batch while the producer's transaction is open here is
        refused, as Kafka's ProducerAppendInfo does."""
        if pid in self.ongoing:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"Expected transactional write from producer {pid}")

    def begin(self, pid: int, offset: int) -> None:
        """A transactional batch at `offset` was appended: it opens the producer's
        transaction here unless one is open."""
        if pid not in self.ongoing:
            self.ongoing[pid] = offset
            if self.first_unstable is None:
                self.first_unstable = offset

    def check_marker(self, pid: int, epoch: int) -> None:
        """Before a marker is appended: an epoch older than the producer's is refused."""
        e = self.producers.get(pid)
        if e is not None and epoch < e.epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"Marker epoch {epoch} of producer {pid} is older than {e.epoch}")

    def end(self, pid: int, epoch: int, coordinator_epoch: int, offset: int,
            timestamp: int) -> tuple[int, int] | None:
        """The producer's marker was appended at `offset`. Returns (first offset, LSO after
        it) of the transaction it ends, as Kafka's CompletedTxn and lastStableOffset, or
        None when none was open here (an empty transaction leaves no trace)."""
        e = self.producers.get(pid)
        # A new epoch (the coordinator's bump on abort or fencing) starts a fresh sequence.
        batches = e.batches if e is not None and e.epoch == epoch else b""
        self.producers[pid] = ProducerEntry(epoch, timestamp, batches, coordinator_epoch)
        first = self.ongoing.pop(pid, None)
        if first is None:
            return None
        self.first_unstable = next(iter(self.ongoing.values()), None)
        return first, offset + 1 if self.first_unstable is None else self.first_unstable

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is `expiration_ms` old; returns how many."""
        doomed = [pid for pid, e in self.producers.items()
                  if now_ms - e.timestamp >= expiration_ms and pid not in self.ongoing]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The snapshot file's bytes: each producer with its last batch, as Kafka keeps it."""
        return encode_snapshot(self.producers, self.ongoing)

    def frozen_snapshot(self) -> Callable[[], bytes]:
        """The current state's snapshot, to be encoded later, on another thread: copying the
        dict is all the caller's thread does."""
        return functools.partial(encode_snapshot, dict(self.producers), dict(self.ongoing))

    def restore(self, entries: Iterable[snap.Entry], now_ms: int, expiration_ms: int) -> None:
        ongoing = []
        for pid, epoch, last_s, last_off, delta, ts, coordinator_epoch, txn_first in entries:
            if now_ms - ts >= expiration_ms and txn_first < 0:
                continue  # as Kafka's loadFromSnapshot, expired producers are not loaded
            batch = b"" if last_off < 0 else _BATCH.pack(
                (last_s - delta) & INT32_MAX, last_s, last_off - delta)
            self.producers[pid] = ProducerEntry(epoch, ts, batch, coordinator_epoch)
            if txn_first >= 0:
                ongoing.append((txn_first, pid))
        for first, pid in sorted(ongoing):
            self.begin(pid, first)

    def load(self, directory: str, log_start: int, log_end: int, segment_bases: list[int],
             now_ms: int, expiration_ms: int) -> tuple[int, bool]:
        """Load the newest usable snapshot, deleting the ones Kafka's loader deletes (strays
        that match no segment, except the newest one past the last segment's base, and those
        outside (log start, log end]). Returns the offset from which the log must be
        replayed, and whether the state came from an older kafkalite's JSON file."""
        offsets = snap.list_offsets(directory, remove_unfinished=True)
        bases = set(segment_bases)
        strays = [o for o in offsets if o not in bases]
        newest_stray = strays[-1] if strays and strays[-1] > max(bases) else None
        keep = [o for o in offsets
                if (o in bases or o == newest_stray) and log_start < o <= log_end]
        snap.delete(directory, sorted(set(offsets) - set(keep)))
        while keep:
            try:
                entries = snap.read(directory, keep[-1])
            except (snap.CorruptSnapshot, OSError) as e:
                log.warning("Producer snapshot %s in %s is unusable (%s); trying an older one",
                            snap.file_name(keep[-1]), directory, e)
                snap.delete(directory, [keep.pop()])
                continue
            self.restore(entries, now_ms, expiration_ms)
            self.snapshots = keep
            return keep[-1], False
        legacy = self._load_legacy(directory, log_start, log_end, now_ms)
        if legacy is not None:
            return legacy, True
        return log_start, False

    def _load_legacy(self, directory: str, log_start: int, log_end: int,
                     now_ms: int) -> int | None:
        """The JSON file of kafkalite 0.1.0 (written at clean shutdown, with up to five
        batches per producer and no timestamps: they count from now). Removed once the
        first snapshot in Kafka's format is written."""
        try:
            with open(os.path.join(directory, snap.LEGACY)) as f:
                data = json.load(f)
            offset = int(data["offset"])
            producers = {int(pid): ProducerEntry(epoch, now_ms, b"".join(
                _BATCH.pack(*b) for b in batches[-CACHED_BATCHES:]))
                for pid, (epoch, batches) in data["producers"].items()}
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, struct.error) as e:
            log.warning("Ignoring unreadable %s in %s: %s", snap.LEGACY, directory, e)
            return None
        if not log_start <= offset <= log_end:
            return None
        self.producers = producers
        return offset

    def take_obsolete(self, first_segment_base: int) -> list[int]:
        """Forget and return the snapshots below the first segment: Kafka deletes a
        segment's snapshot with the segment."""
        n = 0
        while n < len(self.snapshots) and self.snapshots[n] < first_segment_base:
            n += 1
        doomed, self.snapshots = self.snapshots[:n], self.snapshots[n:]
        return doomed


def encode_snapshot(producers: dict[int, ProducerEntry],
                    ongoing: dict[int, int] | None = None) -> bytes:
    return snap.encode(_entries(producers, ongoing or {}))


def _entries(producers: dict[int, ProducerEntry],
             ongoing: dict[int, int]) -> Iterator[snap.Entry]:
    for pid, e in producers.items():
        txn_first = ongoing.get(pid, -1)
        last = e.last_batch()
        if last is None:
            yield pid, e.epoch, -1, -1, 0, e.timestamp, e.coordinator_epoch, txn_first
            continue
        first_s, last_s, base = last
        delta = (last_s - first_s) & INT32_MAX
        yield (pid, e.epoch, last_s, base + delta, delta, e.timestamp, e.coordinator_epoch,
               txn_first)


class ProducerIdAllocator:
    """Hands out producer ids. The file holds a limit below which ids may have been handed
    out, made durable before any id under it is: after a crash, allocation resumes at the
    limit, so no id is handed out twice. The next block is reserved off the event loop when
    half of the current one is used, so InitProducerId waits on a disk sync only when a burst
    outruns the disk (and once after start).

    In a cluster the blocks come from elsewhere instead (use_blocks: ZooKeeper's
    /latest_producer_id_block), reserved ahead the same way; they need not follow one
    another, so the next is kept aside until the current one runs out."""

    BLOCK = 1000

    def __init__(self, path: str, block: int = BLOCK,
                 write: Callable[[str, bytes], None] = atomic_write):
        self.path = path
        self.block = block
        self._write = write
        self._next = 0
        self._limit = 0
        self._ahead: list[tuple[int, int]] = []  # claimed blocks [first, end), in order
        self._claim: Callable[[], Awaitable[tuple[int, int]]] | None = None
        self._claimable: Callable[[], bool] = bool
        self._reserving: asyncio.Future | None = None
        try:
            with open(path) as f:
                self._next = self._limit = int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            pass

    def use_blocks(self, claim: Callable[[], Awaitable[tuple[int, int]]],
                   claimable: Callable[[], bool] = lambda: True) -> None:
        """From now on take ids only from the blocks claim() returns, as (first, last)
        inclusive; call it before the first allocate(). The file is no longer written. While
        claimable() is false (ZooKeeper unreachable: a claim would wait for it), a request
        finding no id at hand is refused with COORDINATOR_LOAD_IN_PROGRESS at once, as
        Kafka's producer-id manager answers while it has no block, and clients retry."""
        self._claim = claim
        self._claimable = claimable
        self._next = self._limit = 0
        self._ahead.clear()

    @property
    def reserving(self) -> bool:
        """A block is being persisted (or claimed)."""
        return self._reserving is not None

    async def allocate(self) -> int:
        """A fresh producer id. Raises OSError when the next block cannot be persisted (in a
        cluster, what claim() raises)."""
        while self._next >= self._limit:
            if self._ahead:
                self._next, self._limit = self._ahead.pop(0)
                continue
            fut = self._reserve()
            if self._claim is not None and not self._claimable():
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 "No producer id block at hand: ZooKeeper is unreachable")
            await fut
            if self._reserving is fut:
                # Done, but its callback (which raises the limit) has not run yet: a request
                # can arrive between the two, and awaiting a done future does not yield, so
                # without this the loop would spin forever and the broker hang.
                await asyncio.sleep(0)
        pid = self._next
        self._next += 1
        if self._left() <= self.block // 2 and self._reserving is None:
            self._reserve().add_done_callback(_log_failure)
        return pid

    def _left(self) -> int:
        return self._limit - self._next + sum(end - first for first, end in self._ahead)

    def _reserve(self) -> asyncio.Future:
        if self._reserving is None:
            if self._claim is not None:
                fut = asyncio.ensure_future(self._claim())
                fut.add_done_callback(self._claimed)
            else:
                limit = max(self._limit, self._next) + self.block
                loop = asyncio.get_running_loop()
                fut = loop.run_in_executor(None, self._write, self.path, str(limit).encode())
                fut.add_done_callback(lambda f: self._reserved(f, limit))
            self._reserving = fut
        return self._reserving

    def _reserved(self, fut: asyncio.Future, limit: int) -> None:
        self._reserving = None
        if not fut.cancelled() and fut.exception() is None:
            self._limit = max(self._limit, limit)

    def _claimed(self, fut: asyncio.Future) -> None:
        self._reserving = None
        if not fut.cancelled() and fut.exception() is None:
            first, last = fut.result()
            self._ahead.append((first, last + 1))


def _log_failure(fut: asyncio.Future) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("Reserving the next producer-id block failed: %s", fut.exception())
