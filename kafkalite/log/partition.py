# The log of one partition: an ordered list of segments, offsets, roll, retention, flush.
#
# A single node's high watermark is the log end offset and its batches carry leader epoch
# 0; a replicated log (replica.py: follower appends, truncation, a stored high watermark)
# gets the epochs its leaders stamp. The log start offset advances with retention (whole
# segments) and DeleteRecords (any offset); the latter is checkpointed in `log-start-offset`.
# `epochs` is the leader-epoch cache (leader_epoch.py), kept in `leader-epoch-checkpoint`
# as Kafka does: opening the log makes this broker leader at epoch 0 from the log end (a new
# partition's file reads `0 0`), and a moving log start moves the first epoch's start.
#
# Deletion (retention, DeleteRecords) is retention.py's, transactions (the LSO, `.txnindex`
# lookups) are txnlog.py's and replication's side replica.py's: this class inherits them.
#
# Nothing here waits for the disk on the event loop's thread while the broker serves:
# fsyncs (roll, flush.messages, flush.ms), checkpoints and unlinks of deleted segments go to
# the flusher thread (flusher.py; the recovery point that follows rolls is recovery.py's),
# and Fetch reads through reads.py. flush() and close() wait for the queued work, so the
# clean-shutdown marker is written only once everything is on disk.
from __future__ import annotations

import functools
import logging
import os
from bisect import bisect_right
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from ..wire.records import BatchHeader, offset_prefix, with_log_append_time
from .errors import OffsetOutOfRange, StorageError, storage_error
from . import partition_lookup
from .flusher import PartitionFlusher, open_dir
from . import leader_epoch
from .reads import without_blocking
from .recovery import load_segments, read_offset_file
from .replica import ReplicaLog
from .read_positions import LOG_OVERHEAD, ReadPositions, first_batch_size
from .segment import Segment
from .retention import START_CHECKPOINT, LogDeletion
from .retention import wall_now_ms as _now_ms
from .txnlog import TransactionalLog

__all__ = ["LogConfig", "PartitionLog", "StorageError", "LEADER_EPOCH"]

log = logging.getLogger("kafkalite.log")

LEADER_EPOCH = 0


@dataclass
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    flush_messages: int = 2**63 - 1
    flush_ms: int = 2**63 - 1
    max_message_bytes: int = 1048588
    log_append_time: bool = False
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1
    cleanup_policy: str = "delete"
    compression: tuple[int, int | None] | None = None  # wire/recompress.py target_codec
    # the log cleaner's (cleaner.py)
    delete_retention_ms: int = 86400000
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    file_delete_delay_ms: int = 60000


class PartitionLog(LogDeletion, TransactionalLog, ReplicaLog):
    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig,
                 recover: bool = False, flusher: ThreadPoolExecutor | None = None):
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self._read_positions = ReadPositions()  # where recent reads ended
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self.producer_state: object | None = None  # owned by the broker (idempotence)
        # Called as on_roll(partition, rolled_segment) after each roll (producer snapshots).
        self.on_roll: Callable[["PartitionLog", Segment], None] | None = None
        self.durability = PartitionFlusher(directory, f"{topic}-{partition}", flusher)
        self._ack_flush: Future | None = None  # a flush.messages fsync the producer awaits
        self._start_checkpoint: Future | None = None
        self._dir_synced = True  # the active segment's directory entry is durable
        self.cleaning = False  # the cleaner reads its segments: no deletion meanwhile
        os.makedirs(directory, exist_ok=True)
        self._load(recover)
        self._log_start_offset = max(self.segments[0].base_offset,
                                     self._read_start_checkpoint())
        self.epochs = leader_epoch.open_cache(self.directory, self._log_start_offset,
                                              self.log_end_offset, LEADER_EPOCH,
                                              self._save_epochs)

    # --- loading --------------------------------------------------------------------------

    def _load(self, recover: bool) -> None:
        self.segments = load_segments(self.directory, f"{self.topic}-{self.partition}",
                                      self.config.index_interval_bytes, recover)
        if not self.segments:
            self.segments.append(Segment(self.directory, 0, self.config.index_interval_bytes))
        self._bases = [s.base_offset for s in self.segments]

    def _read_start_checkpoint(self) -> int:
        return min(read_offset_file(self.directory, START_CHECKPOINT), self.log_end_offset)

    def _save_epochs(self, data: bytes) -> None:
        try:
            self.durability.checkpoint(leader_epoch.NAME, data)
        except OSError as e:  # rebuilt from the log start at the next open
            log.error("Leader epoch checkpoint of %s-%d failed: %s", self.topic,
                      self.partition, e)

    # --- state ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @log_start_offset.setter
    def log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self.epochs.truncate_from_start(offset)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appends --------------------------------------------------------------------------

    def append(self, batch: bytes, h: BatchHeader, now_ms: int | None = None,
               leader_epoch: int = LEADER_EPOCH) -> int:
        """Append one validated batch as the leader at `leader_epoch` (stamped in the batch;
        a newer epoch than the cache's latest starts there); returns its base offset.
        Raises StorageError. When flush.messages is reached, an fsync is queued:
        take_ack_flush() returns it."""
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        max_ts = h.max_timestamp
        if cfg.log_append_time:
            batch = with_log_append_time(batch, now)
            max_ts = now
        self._maybe_roll(len(batch), max_ts, now)
        base = self.log_end_offset
        last = base + h.last_offset_delta
        seg = self.active
        seg.append(offset_prefix(base, h.batch_length, leader_epoch), memoryview(batch)[16:],
                   base, last, max_ts)
        if leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(leader_epoch, base)
        self.unflushed_messages += h.records_count
        if self.unflushed_messages >= cfg.flush_messages:
            self._ack_flush = self.schedule_flush()
        return base

    def take_ack_flush(self) -> Future | None:
        """The fsync that the last append queued for flush.messages, if any: as in Kafka,
        where that flush runs before the append returns, the producer's answer waits."""
        fut, self._ack_flush = self._ack_flush, None
        return fut

    def _maybe_roll(self, size: int, max_ts: int, now: int) -> None:
        seg = self.active
        if seg.size == 0:
            return
        cfg = self.config
        if seg.size + size > cfg.segment_bytes:
            self.roll()
            return
        first = seg.first_batch_timestamp
        if first is not None and first >= 0:
            waited = max_ts - first
        else:
            if seg.created_at_ms is None:
                seg.created_at_ms = seg.last_modified_ms()
            waited = now - seg.created_at_ms
        if waited > cfg.segment_ms:
            self.roll()

    def roll(self) -> Segment:
        """Start a new segment at the log end. The old one is fsynced (with the directory,
        which names the new one) by the flusher; the recovery point follows. Raises
        StorageError, leaving the old segment active."""
        old = self.active
        if old.size == 0:
            return old
        label = f"roll of {self.topic}-{self.partition} at offset {old.next_offset}"
        try:
            dir_fd = open_dir(self.directory)
        except OSError as e:
            raise storage_error(e, label) from e
        seg = None
        try:
            seg = Segment(self.directory, old.next_offset, self.config.index_interval_bytes)
            fds = old.retire()
        except OSError as e:
            os.close(dir_fd)
            if seg is not None:
                seg.close()
            raise storage_error(e, label) from e
        seg.next_offset = old.next_offset
        seg.created_at_ms = _now_ms()
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_synced = False
        self.durability.rolled(fds, dir_fd, seg.base_offset)
        if self.on_roll is not None:
            self.on_roll(self, old)
        return seg

    # --- reads ----------------------------------------------------------------------------

    def check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} not in [{self.log_start_offset}, "
                                   f"{self.log_end_offset}]")

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True,
             nowait: bool = False, max_offset: int | None = None) -> bytes | bytearray:
        """Bytes of whole batches from the one holding `offset`, at most `max_bytes` unless
        the first batch is larger and `min_one_batch`. Like Kafka, the last batch may be cut
        short; clients drop the partial tail. `max_offset` (read_committed: the LSO, always
        a batch boundary) ends the read before the batch holding it. Raises
        OffsetOutOfRange, StorageError, and with `nowait` reads.WouldBlock rather than wait
        for the disk.

        Like Kafka, one segment's bytes, with one exception: a segment read to its end that
        held only record-less batches (what the cleaner leaves of a group it emptied) is
        followed by the next segments' bytes. Kafka leaves such a segment empty and its read
        moves on to the next; an answer of empty batches alone makes librdkafka take the
        fetch size for too small and, after doubling it a few times, fail the partition with
        MSG_SIZE_TOO_LARGE."""
        self.check_offset(offset)
        end = self.log_end_offset if max_offset is None else max_offset
        data, next_offset = self._read_one(offset, max_bytes, min_one_batch, nowait, end)
        if next_offset is None or not only_empty_batches(data):
            return data
        parts, total = [data], len(data)
        while next_offset is not None and next_offset < end and total < max_bytes:
            more, next_offset = self._read_one(next_offset, max_bytes - total, min_one_batch,
                                               nowait, end)
            parts.append(more)
            total += len(more)
            if not only_empty_batches(more):
                break
        return b"".join(parts)

    def _read_one(self, offset: int, max_bytes: int, min_one_batch: bool, nowait: bool,
                  end: int) -> tuple[bytes | bytearray, int | None]:
        """read() within one segment: (bytes, the segment's next offset when the bytes run
        to its end, else None)."""
        if offset >= end:
            return b"", None
        i = bisect_right(self._bases, offset) - 1
        hit = self._read_positions.get(offset)
        if hit is not None and 0 <= i < len(self.segments) and self.segments[i] is hit[0] \
                and hit[1] < hit[0].size and end >= hit[0].next_offset:
            seg, pos = hit
            data = self._read_at(seg, pos, max_bytes, min_one_batch, nowait)
            return data, seg.next_offset if pos + len(data) == seg.size else None
        for seg in self.segments[max(i, 0):]:
            found = seg.find(offset, nowait)
            if found is None:
                continue
            pos, first = found
            limit = seg.size
            if end < seg.next_offset:
                stop = seg.find(end, nowait)
                limit = stop[0] if stop is not None else limit
            length = min(max_bytes, limit - pos)
            if min_one_batch and first > length:
                length = min(first, limit - pos)
            if length <= 0:
                return b"", None
            data = seg.read(pos, length, nowait)
            self._read_positions.remember(seg, pos, data)
            return data, seg.next_offset if pos + len(data) == seg.size else None
        return b"", None

    def _read_at(self, seg: Segment, pos: int, max_bytes: int, min_one_batch: bool,
                 nowait: bool) -> bytes | bytearray:
        """read() from a remembered batch position: no index lookup, no header scan."""
        length = min(max_bytes, seg.size - pos)
        data = seg.read(pos, length, nowait) if length > 0 else b""
        if min_one_batch and len(data) < seg.size - pos:
            first = first_batch_size(data if len(data) >= LOG_OVERHEAD
                                     else seg.read(pos, LOG_OVERHEAD, nowait))
            if first > len(data):
                data = seg.read(pos, min(first, seg.size - pos), nowait)
        self._read_positions.remember(seg, pos, data)
        return data

    async def read_async(self, offset: int, max_bytes: int, min_one_batch: bool = True,
                         max_offset: int | None = None) -> bytes | bytearray:
        """read() for the event loop: it never waits there for the disk (reads.py)."""
        if max_offset is None:
            return await without_blocking(self.read, offset, max_bytes, min_one_batch)
        return await without_blocking(functools.partial(self.read, max_offset=max_offset),
                                      offset, max_bytes, min_one_batch)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
        return partition_lookup.offset_for_timestamp(self, timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp."""
        return partition_lookup.max_timestamp_offset(self)

    async def offset_for_timestamp_async(self, timestamp: int) -> tuple[int, int] | None:
        """offset_for_timestamp() for the event loop: it never waits there for the disk."""
        return await partition_lookup.without_waiting(partition_lookup.offset_for_timestamp,
                                                      self, timestamp)

    async def max_timestamp_offset_async(self) -> tuple[int, int] | None:
        return await partition_lookup.without_waiting(partition_lookup.max_timestamp_offset,
                                                      self)

    # --- durability -----------------------------------------------------------------------

    def schedule_flush(self) -> Future:
        """Queue an fsync of everything appended so far (flush.messages, flush.ms)."""
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        return self.durability.fsync(self.active, self.active.sync_handles)

    def flush(self) -> None:
        """Make everything durable now, on this thread (clean shutdown). Raises StorageError,
        also for a queued fsync that failed earlier."""
        try:
            error = self.durability.drain() or self.durability.failed
            if error is not None:
                raise error
            self.active.flush()
        except OSError as e:
            raise storage_error(e, f"flush of {self.directory} failed") from e
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()

    def sync_handles(self) -> list[int]:
        """Descriptors whose fsync makes every append so far durable (earlier segments are
        fsynced by the flusher, or were at an earlier acks=all answer); the caller closes
        them. After a roll, the directory is among them: it names the new segment."""
        fds = self.active.sync_handles()
        if not self._dir_synced:
            try:
                fds.append(open_dir(self.directory))
            except OSError:
                for fd in fds:
                    os.close(fd)
                raise
            self._dir_synced = True
        return fds

    def maybe_flush_by_time(self, now_ms: int) -> None:
        if self.unflushed_messages and now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.schedule_flush()

    def close(self) -> None:
        """Wait for the queued work (so that nothing claims more than is on disk), then
        close every segment."""
        error = self.durability.drain()
        if error is not None:
            log.error("Closing %s-%d after a failed flush: %s", self.topic, self.partition,
                      error)
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        for seg in self.segments:
            seg.delete()
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)


def only_empty_batches(data: bytes | bytearray) -> bool:
    """Whether `data` is whole batches, all of them data batches without records (batch
    headers only: attributes at 21, records count at 57)."""
    pos, n = 0, len(data)
    while pos + LOG_OVERHEAD + 49 <= n:
        if data[pos + 22] & 0x20 or data[pos + 57:pos + 61] != b"\0\0\0\0":
            return False
        pos += LOG_OVERHEAD + int.from_bytes(data[pos + 8:pos + 12], "big")
    return n > 0 and pos == n
