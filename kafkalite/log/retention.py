# The deletion side of a partition's log (PartitionLog inherits it): whole segments removed
# by retention.ms / retention.bytes (cleanup.policy holding `delete`) and the log start
# offset moved by DeleteRecords, checkpointed in `log-start-offset`.
#
# Nothing is deleted while the log cleaner reads the partition's segments (`cleaning`): the
# next retention pass does it, and the log start offset already hides what DeleteRecords
# removed meanwhile.
from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable

from .errors import OffsetOutOfRange, storage_error
from .flusher import PartitionFlusher, wait_durable

if TYPE_CHECKING:
    from .partition import LogConfig
    from .segment import Segment

log = logging.getLogger("kafkalite.log")

START_CHECKPOINT = "log-start-offset"


def wall_now_ms() -> int:
    return int(time.time() * 1000)


class LogDeletion:
    topic: str
    partition: int
    config: "LogConfig"
    segments: list["Segment"]
    _bases: list[int]
    log_start_offset: int
    high_watermark: int
    size: int
    cleaning: bool
    durability: PartitionFlusher
    _start_checkpoint: Future | None
    active: "Segment"
    roll: Callable[[], "Segment"]

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords); -1 means the high watermark."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(f"cannot delete below {offset}: high watermark is "
                                   f"{self.high_watermark}")
        if offset > self.log_start_offset:
            try:
                self._start_checkpoint = self.durability.checkpoint(
                    START_CHECKPOINT, str(offset).encode())
            except OSError as e:
                raise storage_error(e, f"checkpoint of {self.topic}-{self.partition}") from e
            self.log_start_offset = offset
            self._delete_segments(lambda s, nxt: s.next_offset <= offset)
        return self.log_start_offset

    async def start_offset_durable(self) -> None:
        """Wait until the log start offset that delete_records() set is on disk (the
        checkpoint runs on the flusher). Raises StorageError."""
        await wait_durable(self._start_checkpoint,
                           f"log start checkpoint of {self.topic}-{self.partition}")

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms or retention.bytes; returns how many."""
        if "delete" not in self.config.cleanup_policy:
            return 0
        now = wall_now_ms() if now_ms is None else now_ms
        start = self.log_start_offset  # DeleteRecords that ran during a cleaning
        deleted = self._delete_segments(
            lambda s, nxt: nxt is not None and nxt.base_offset <= start)
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
        if self.cleaning:
            return 0  # the next retention pass (log start offset is kept meanwhile)
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
        names: list[str] = []
        for seg in doomed:
            self.segments.remove(seg)
            log.info("Deleting segment %s of %s-%d (log start moves to %d)",
                     os.path.basename(seg.path), self.topic, self.partition,
                     self.segments[0].base_offset)
            try:
                names += seg.detach()
            except OSError as e:  # the segment is out of the log; its files stay behind
                log.error("Renaming segment %s for deletion failed: %s", seg.path, e)
        self._bases = [s.base_offset for s in self.segments]
        self.durability.unlink(names)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        return len(doomed)
