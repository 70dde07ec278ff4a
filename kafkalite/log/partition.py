# The log of one partition: an ordered list of segments, offsets, roll, retention, flush.
#
# Single-broker semantics: the high watermark is the log end offset, and the partition
# leader epoch is always 0. The log start offset advances with retention (whole segments)
# and DeleteRecords (any offset); the latter is checkpointed in `log-start-offset`.
from __future__ import annotations

import logging
import os
import time
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterator

from ..fileio import atomic_write
from ..wire.errors import ErrorCode, KafkaError
from ..wire.records import (HEADER_SIZE, BatchHeader, offset_prefix, parse_header,
                            with_log_append_time)
from ..wire.record_iter import first_record_at_or_after, record_with_timestamp
from .segment import Segment, StorageError

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


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig,
                 recover: bool = False):
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self.producer_state: object | None = None  # owned by the broker (idempotence)
        # Called as on_roll(partition, rolled_segment) after each roll (producer snapshots).
        self.on_roll: Callable[["PartitionLog", Segment], None] | None = None
        os.makedirs(directory, exist_ok=True)
        self._load(recover)
        self.log_start_offset = max(self.segments[0].base_offset, self._read_start_checkpoint())

    # --- loading --------------------------------------------------------------------------

    def _load(self, recover: bool) -> None:
        bases = sorted(int(n[:-4]) for n in os.listdir(self.directory)
                       if n.endswith(".log") and n[:-4].isdigit())
        for name in os.listdir(self.directory):
            stem, _, ext = name.partition(".")
            if ext in ("index", "timeindex") and stem.isdigit() and int(stem) not in bases:
                os.unlink(os.path.join(self.directory, name))  # index without a segment
        for i, base in enumerate(bases):
            seg = Segment(self.directory, base, self.config.index_interval_bytes)
            last = i == len(bases) - 1
            dropped = seg.load(recover=recover and last)
            if dropped:
                log.warning("Recovery of %s-%d: truncated %d bytes of %s at offset %d "
                            "(torn or corrupt tail)", self.topic, self.partition, dropped,
                            os.path.basename(seg.path), seg.next_offset)
            if not last:
                seg.deactivate()
            if self.segments and seg.base_offset < self.segments[-1].next_offset:
                log.warning("Segment %s overlaps its predecessor; ignoring it", seg.path)
                seg.close()
                continue
            self.segments.append(seg)
        if not self.segments:
            self.segments.append(Segment(self.directory, 0, self.config.index_interval_bytes))
        self._bases = [s.base_offset for s in self.segments]

    def _start_checkpoint_path(self) -> str:
        return os.path.join(self.directory, "log-start-offset")

    def _read_start_checkpoint(self) -> int:
        try:
            with open(self._start_checkpoint_path()) as f:
                return min(int(f.read().strip() or 0), self.log_end_offset)
        except (FileNotFoundError, ValueError):
            return 0

    def _write_start_checkpoint(self) -> None:
        atomic_write(self._start_checkpoint_path(), str(self.log_start_offset).encode())

    # --- state ----------------------------------------------------------------------------

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    high_watermark = log_end_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appends --------------------------------------------------------------------------

    def append(self, batch: bytes, h: BatchHeader, now_ms: int | None = None) -> int:
        """Append one validated batch; returns its base offset. Raises StorageError."""
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
        seg.append(offset_prefix(base, h.batch_length, LEADER_EPOCH), memoryview(batch)[16:],
                   base, last, max_ts)
        self.unflushed_messages += h.records_count
        if self.unflushed_messages >= cfg.flush_messages:
            self.flush()
        return base

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
        old = self.active
        if old.size == 0:
            return old
        old.flush()  # Kafka flushes a segment when it rolls; only the active one can tear
        seg = Segment(self.directory, old.next_offset, self.config.index_interval_bytes)
        seg.next_offset = old.next_offset
        seg.created_at_ms = _now_ms()
        old.deactivate()
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        _fsync_dir(self.directory)  # the new segment's name must survive a power loss
        if self.on_roll is not None:
            self.on_roll(self, old)
        return seg

    # --- reads ----------------------------------------------------------------------------

    def check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"offset {offset} not in [{self.log_start_offset}, "
                             f"{self.log_end_offset}]")

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> bytes:
        """Bytes of whole batches from the one holding `offset`, at most `max_bytes` unless
        the first batch is larger and `min_one_batch`. Like Kafka, the last batch may be cut
        short; clients drop the partial tail."""
        self.check_offset(offset)
        if offset == self.log_end_offset:
            return b""
        i = bisect_right(self._bases, offset) - 1
        for seg in self.segments[max(i, 0):]:
            found = seg.find(offset)
            if found is None:
                continue
            pos, first = found
            length = min(max_bytes, seg.size - pos)
            if min_one_batch and first > length:
                length = first
            if length <= 0:
                return b""
            return seg.read(pos, length)
        return b""

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
        for seg in self.segments:
            if seg.max_timestamp < timestamp:
                continue
            for _pos, batch in seg.find_timestamp(timestamp):
                hit = first_record_at_or_after(batch, timestamp, self.log_start_offset)
                if hit is not None:
                    return hit
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp."""
        best = None
        for seg in self.segments:
            if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None or best.max_timestamp < 0:
            return None
        for _pos, batch in best.find_timestamp(best.max_timestamp):
            hit = record_with_timestamp(batch, best.max_timestamp)
            if hit is not None:
                return hit
        return None

    def iter_batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of every batch ending at or after `from_offset` (state rebuilds)."""
        i = max(bisect_right(self._bases, from_offset) - 1, 0)
        for seg in self.segments[i:]:
            found = seg.find(from_offset)
            pos = found[0] if found else seg.size
            while pos + HEADER_SIZE <= seg.size:
                h = parse_header(seg.read(pos, HEADER_SIZE))
                yield h
                pos += h.size

    # --- deletion -------------------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords); -1 means the high watermark."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"cannot delete below {offset}: high watermark is "
                             f"{self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._write_start_checkpoint()
            self._delete_segments(lambda s, nxt: s.next_offset <= offset)
        return self.log_start_offset

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms or retention.bytes; returns how many."""
        if "delete" not in self.config.cleanup_policy:
            return 0
        now = _now_ms() if now_ms is None else now_ms
        deleted = 0
        rms = self.config.retention_ms
        if rms >= 0:
            deleted += self._delete_segments(
                lambda s, nxt: s.size > 0 and s.max_timestamp >= 0
                and now - s.max_timestamp > rms)
        rbytes = self.config.retention_bytes
        if rbytes >= 0:
            excess = self.size - rbytes

            def over(s: Segment, nxt) -> bool:
                nonlocal excess
                if s.size > 0 and excess - s.size >= 0:
                    excess -= s.size
                    return True
                return False
            deleted += self._delete_segments(over)
        return deleted

    def _delete_segments(self, predicate) -> int:
        """Delete the leading segments for which predicate(seg, next) holds. The active
        segment goes too when it qualifies: a new empty one is rolled at the end offset."""
        doomed: list[Segment] = []
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            if not predicate(seg, nxt):
                break
            doomed.append(seg)
        if doomed and doomed[-1] is self.active:
            if self.active.size == 0:
                doomed.pop()  # an empty active segment already starts at the end offset
            else:
                self.roll()
        if not doomed:
            return 0
        for seg in doomed:
            self.segments.remove(seg)
            log.info("Deleting segment %s of %s-%d (log start moves to %d)",
                     os.path.basename(seg.path), self.topic, self.partition,
                     self.segments[0].base_offset)
            seg.delete()
        self._bases = [s.base_offset for s in self.segments]
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        return len(doomed)

    # --- durability -----------------------------------------------------------------------

    def flush(self) -> None:
        try:
            self.active.flush()
        except OSError as e:
            raise StorageError(e.errno, f"flush of {self.directory} failed: {e}") from e
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()

    def sync_handles(self) -> list[int]:
        """Descriptors whose fsync makes every append so far durable (earlier segments were
        flushed when they rolled); the caller closes them."""
        return self.active.sync_handles()

    def maybe_flush_by_time(self, now_ms: int) -> None:
        if self.unflushed_messages and now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.flush()

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        for seg in self.segments:
            seg.delete()
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)
