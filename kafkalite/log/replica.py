# The replicated side of a partition's log (PartitionLog inherits it), after Kafka's
# UnifiedLog/LocalLog: a follower's appends of the leader's batches as they are
# (appendAsFollower), truncation to an offset (truncateTo) or of everything
# (truncateFullyAndStartAt), and a high watermark of its own.
#
# A single node's log is not `replicated`: its high watermark is its log end offset, as it
# always was. The cluster layer sets `replicated`; from then on the high watermark is a
# stored value that update_high_watermark() moves (clamped to [log start, log end]), that
# starts from the data directory's `replication-offset-checkpoint` (hw_checkpoint.py) and
# that truncation clamps.
#
# Truncation is made durable off the event loop: the cut files are fsynced and the
# recovery point lowered to the new end (flusher.truncated, which also fsyncs the directory
# that lost the removed segments' names) by the partition's flusher, in order after
# everything queued before. Removed segments are renamed `*.deleted` at once (a start
# deletes leftovers), so neither a reopen nor a recovery brings their batches back.
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from ..wire.batch_builder import marker_type
from ..wire.record_iter import iter_records
from ..wire.records import (CONTROL_BIT, HEADER_SIZE, MIN_BATCH_LENGTH, TRANSACTIONAL_BIT,
                            BatchHeader, crc_ok, parse_header)
from .errors import CorruptRecord, UnexpectedAppendOffset, storage_error
from .flusher import PartitionFlusher
from .read_positions import ReadPositions
from .retention import START_CHECKPOINT, wall_now_ms
from .segment import Segment

if TYPE_CHECKING:
    from .leader_epoch import LeaderEpochCache
    from .partition import LogConfig

log = logging.getLogger("kafkalite.log")


def replica_batches(data: bytes | bytearray | memoryview, log_end_offset: int
                    ) -> list[tuple[int, BatchHeader]]:
    """(position, header) of the whole batches in `data`, checked as a follower checks a
    leader's Fetch answer: framing and CRC per batch (no record is decoded), none below
    `log_end_offset`, offsets increasing. A trailing partial batch is left out. Raises
    UnexpectedAppendOffset, CorruptRecord.

    Offset gaps are accepted, before the first batch as between two, as Kafka's
    UnifiedLog.append without offset assignment (only an offset below the log end or out of
    order is refused): a compacted leader's log has them, where the cleaner removed whole
    batches, so a follower's fetch from its log end may get a first batch above it."""
    out: list[tuple[int, BatchHeader]] = []
    pos, n, expected = 0, len(data), log_end_offset
    while pos + HEADER_SIZE <= n:
        h = parse_header(data, pos)
        if h.magic != 2 or h.batch_length < MIN_BATCH_LENGTH or h.last_offset_delta < 0:
            raise CorruptRecord(f"invalid batch at byte {pos} (magic {h.magic}, length "
                                f"{h.batch_length}, lastOffsetDelta {h.last_offset_delta})")
        if pos + h.size > n:
            break
        if h.base_offset < expected:
            where = (f"the log ends at {expected}" if not out else
                     f"the batch before it ends at {expected - 1}")
            raise UnexpectedAppendOffset(
                f"replicated batch at offset {h.base_offset} overlaps: {where}")
        if not crc_ok(data, pos, h.size):
            raise CorruptRecord(f"batch at offset {h.base_offset}: CRC32C mismatch")
        out.append((pos, h))
        expected = h.last_offset + 1
        pos += h.size
    return out


def follow_producer_state(p: Any, state: Any, headers: list[BatchHeader]) -> None:
    """Producer and transaction state after replicated batches (`state`: a
    PartitionProducers), which append_replica() applies itself, batch by batch, to the
    partition's attached `producer_state`: apply_state_batch() for each, with a marker's
    coordinator epoch. Raises StorageError."""
    for h in headers:
        if h.producer_id < 0:
            continue
        if not h.attributes & CONTROL_BIT:
            apply_state_batch(p, state, h, -1)
            continue
        # A control batch is a few dozen bytes, just written: in the page cache.
        batch = bytes(p.read(h.base_offset, h.size, max_offset=h.last_offset + 1))
        apply_state_batch(p, state, h, marker_type(batch), coordinator_epoch(batch))


def apply_state_batch(p: Any, state: Any, h: BatchHeader, control: int,
                      coordinator_epoch: int = -1) -> None:
    """One stored batch's effect on the partition's producer state, without sequence checks
    (the leader made them), as a follower's appends and the replay at load
    (coordinator/producer_state.py) both apply it. `control`: -1 for data, 0 ABORT, 1
    COMMIT. A data batch updates its producer and, transactional, opens its transaction; a
    marker ends it and an ABORT gets its `.txnindex` entry, as a leader's marker append does
    (broker/txn_markers.py). Raises StorageError (the index entry)."""
    if control < 0:
        state.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                     h.base_offset, h.max_timestamp)
        if h.attributes & TRANSACTIONAL_BIT:
            state.begin(h.producer_id, h.base_offset)
        return
    done = state.end(h.producer_id, h.producer_epoch, coordinator_epoch, h.base_offset,
                     h.max_timestamp)
    if done is not None and control == 0:
        p.append_aborted(h.producer_id, done[0], h.base_offset, done[1])


def coordinator_epoch(marker: bytes) -> int:
    """The coordinator epoch of an EndTxnMarker batch (its record's value is `version
    int16, coordinatorEpoch int32`); -1 if it has none."""
    for record in iter_records(marker):
        v = record.value
        return int.from_bytes(v[2:6], "big", signed=True) if v and len(v) >= 6 else -1
    return -1


class ReplicaLog:
    directory: str
    topic: str
    partition: int
    config: "LogConfig"
    segments: list[Segment]
    _bases: list[int]
    _read_positions: ReadPositions
    _log_start_offset: int
    _dir_synced: bool
    durability: PartitionFlusher
    epochs: "LeaderEpochCache"
    unflushed_messages: int
    producer_state: Any
    log_start_offset: int
    log_end_offset: int
    active: Segment
    _maybe_roll: Callable[[int, int, int], None]
    schedule_flush: Callable[[], Any]

    _replicated = False
    _hw = 0
    # How many truncations, and the lowest offset one cut to, since the log was opened:
    # the log cleaner aborts a cleaning under way and lowers its checkpoint (cleaner.py).
    truncations = 0
    lowest_truncation = 2**63 - 1
    # Called as on_truncate(partition, new log end offset) after truncate_to() and
    # truncate_fully_and_start_at(): the broker rebuilds the partition's producer state
    # with ProducerStates.load(partition) (it drops the snapshots past the new end, loads
    # the newest one left and replays the batches after it, .txnindex entries included).
    on_truncate: Callable[[Any, int], None] | None = None

    # --- high watermark -------------------------------------------------------------------

    @property
    def replicated(self) -> bool:
        return self._replicated

    @replicated.setter
    def replicated(self, on: bool) -> None:
        self._replicated = on
        self._hw = self._clamped(self._hw)

    @property
    def high_watermark(self) -> int:
        if not self._replicated:
            return self.log_end_offset
        return self._clamped(self._hw)

    def update_high_watermark(self, offset: int) -> bool:
        """Set the high watermark (a replicated log's), clamped to [log start, log end];
        returns whether it moved."""
        old = self.high_watermark
        self._hw = self._clamped(offset)
        return self.high_watermark != old

    def restore_high_watermark(self, offset: int) -> None:
        """At open: the value of the replication-offset-checkpoint file (clamped)."""
        self._hw = self._clamped(offset)

    def _clamped(self, offset: int) -> int:
        return min(max(offset, self.log_start_offset), self.log_end_offset)

    # --- follower appends -----------------------------------------------------------------

    def append_replica(self, data: bytes | bytearray | memoryview) -> list[BatchHeader]:
        """Append whole batches exactly as the leader's Fetch returned them (offsets,
        leader epochs, timestamps kept); none may start below the log end offset, gaps
        (a compacted leader's) are kept, and the log end becomes the last batch's last
        offset + 1. A trailing partial batch is ignored. The attached `producer_state` (the broker's
        ProducerStates.attach/load; none attached: nothing) follows each batch before the
        next one may roll the log, so each roll's producer snapshot holds what precedes
        it. Returns the headers appended. Raises UnexpectedAppendOffset, CorruptRecord
        (nothing is appended then), StorageError."""
        view = memoryview(data)
        batches = replica_batches(view, self.log_end_offset)
        now = wall_now_ms()
        records = 0
        for pos, h in batches:
            self._maybe_roll(h.size, h.max_timestamp, now)
            self.active.append(bytes(view[pos:pos + 16]), view[pos + 16:pos + h.size],
                               h.base_offset, h.last_offset, h.max_timestamp)
            if h.partition_leader_epoch >= 0 \
                    and h.partition_leader_epoch != self.epochs.latest_epoch:
                self.epochs.assign(h.partition_leader_epoch, h.base_offset)
            if self.producer_state is not None and h.producer_id >= 0:
                follow_producer_state(self, self.producer_state, [h])
            records += h.records_count
        self.unflushed_messages += records
        if self.unflushed_messages >= self.config.flush_messages:
            self.schedule_flush()
        return [h for _pos, h in batches]

    # --- truncation -----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at and after `offset` (nothing when it is not below the log
        end); an offset inside a batch removes that whole batch, as Kafka's segments do;
        below the log start, everything (truncate_fully_and_start_at). Then on_truncate
        gets the new log end. Raises StorageError."""
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = [s for s in self.segments if s.base_offset < offset] or self.segments[:1]
        doomed = self.segments[len(keep):]
        label = f"truncation of {self.topic}-{self.partition} to offset {offset}"
        log.info("Truncating %s-%d to offset %d (log end %d, %d segments removed)",
                 self.topic, self.partition, offset, self.log_end_offset, len(doomed))
        try:
            self._remove(doomed)
            self.segments = keep
            self._bases = [s.base_offset for s in keep]
            self.active.truncate_to(offset)
            self.durability.fsync(self.active, self.active.sync_handles)
            self.durability.truncated(self.active.base_offset)
        except OSError as e:
            raise storage_error(e, label) from e
        finally:
            self._after_truncation(self.log_end_offset)
        end = self.log_end_offset  # below `offset` when it was inside a batch
        self.epochs.truncate_from_end(end)
        if self.on_truncate is not None:
            self.on_truncate(self, end)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Remove every segment and start an empty log at `offset` (its log start, with no
        leader epochs): a follower whose log ends below the leader's log start. Raises
        StorageError."""
        log.info("Truncating %s-%d fully, the log restarts at offset %d", self.topic,
                 self.partition, offset)
        label = f"truncation of {self.topic}-{self.partition} restarting at {offset}"
        try:
            self._remove(list(self.segments))
            seg = Segment(self.directory, offset, self.config.index_interval_bytes)
            self.segments = [seg]
            self._bases = [offset]
            self.durability.checkpoint(START_CHECKPOINT, str(offset).encode())
            self.durability.truncated(offset)
        except OSError as e:
            raise storage_error(e, label) from e
        finally:
            self._after_truncation(offset)
        self._log_start_offset = offset
        self.epochs.clear()
        self._hw = offset
        if self.on_truncate is not None:
            self.on_truncate(self, offset)

    def _remove(self, doomed: list[Segment]) -> None:
        names: list[str] = []
        for seg in doomed:
            names += seg.detach()
        self.durability.unlink(names)

    def _after_truncation(self, offset: int) -> None:
        self.truncations += 1
        self.lowest_truncation = min(self.lowest_truncation, offset)
        self._read_positions = ReadPositions()
        self._dir_synced = False
        self.unflushed_messages = 0
        self._hw = min(self._hw, self.log_end_offset)


__all__ = ["ReplicaLog", "follow_producer_state", "replica_batches"]
