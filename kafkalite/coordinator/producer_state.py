# The broker's idempotent-producer state across all partitions: loading it at start, the
# snapshot at each roll and at clean shutdown, expiry, and deleting obsolete snapshots.
#
# A partition here is anything with PartitionLog's attributes (directory, log start and end
# offsets, segments with base offsets, iter_state_batches, append_aborted, and the
# producer_state / on_roll slots this module fills in). The replay after the snapshot sees
# transactional batches (which open a transaction) and markers (which close it), and puts
# back each aborted transaction's `.txnindex` entry a crash or a deletion lost. At a roll, the caller's thread only copies the dict of
# (immutable) entries, the state at the roll's offset; SnapshotWriter's thread encodes it,
# writes and fsyncs the file, off the event loop, as Kafka flushes it from its scheduler.
from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from ..clock import Clock
from . import producer_snapshot as snap
from ..log.replica import apply_state_batch
from .producers import PartitionProducers

log = logging.getLogger("kafkalite.producers")

EXPIRATION = "producer.id.expiration.ms"
CHECK_INTERVAL = "producer.id.expiration.check.interval.ms"


class ProducerStates:
    def __init__(self, config: Mapping[str, Any], clock: Clock):
        self.config = config  # read at each use: producer.id.expiration.ms is dynamic in Kafka
        self.clock = clock
        self.writer = snap.SnapshotWriter()
        self._next_check = clock.monotonic_ms() + config[CHECK_INTERVAL]

    def load(self, p: Any) -> int:
        """Load the newest snapshot and replay the batch headers after it; returns how many
        headers were replayed."""
        state = PartitionProducers()
        start, legacy = state.load(p.directory, p.log_start_offset, p.log_end_offset,
                                   [s.base_offset for s in p.segments], self.clock.wall_ms(),
                                   self.config[EXPIRATION])
        replayed = 0
        for h, control in p.iter_state_batches(start):
            replayed += 1
            if h.producer_id < 0 or h.base_offset < start:
                continue
            if control >= 0:
                _replay_marker(p, state, h, control)
            else:
                apply_state_batch(p, state, h, control)
        self.attach(p, state)
        if replayed or legacy:
            # As Kafka after a recovery: the next start need not replay this tail again.
            self._snapshot_in_background(p)
        return replayed

    def attach(self, p: Any, state: PartitionProducers | None = None) -> None:
        """Give a partition its state (empty for a new one) and snapshot it at every roll."""
        p.producer_state = state if state is not None else PartitionProducers()
        p.on_roll = self._rolled

    def state(self, p: Any) -> PartitionProducers:
        if p.producer_state is None:
            self.attach(p)
        return p.producer_state

    def _rolled(self, p: Any, _rolled_segment: object) -> None:
        self._snapshot_in_background(p)

    def _snapshot_in_background(self, p: Any) -> None:
        state = self.state(p)
        offset = p.log_end_offset  # at a roll, the new segment's base offset
        if state.snapshots and state.snapshots[-1] >= offset:
            return
        self.writer.submit(p.directory, offset, state.frozen_snapshot(),
                           state.take_obsolete(p.segments[0].base_offset))
        state.snapshots.append(offset)

    def expire(self, partitions: Iterable[Any], now_ms: int | None = None) -> int:
        """At most every producer.id.expiration.check.interval.ms (monotonic clock): forget
        producers whose last batch is producer.id.expiration.ms old by the wall clock
        (`now_ms`, default clock.wall_ms(): Kafka compares it with batch timestamps), and
        delete the snapshots of deleted segments. Returns how many producers were forgotten."""
        mono = self.clock.monotonic_ms()
        if mono < self._next_check:
            return 0
        self._next_check = mono + self.config[CHECK_INTERVAL]
        now = self.clock.wall_ms() if now_ms is None else now_ms
        expiration = self.config[EXPIRATION]
        expired = 0
        for p in partitions:
            state = self.state(p)
            expired += state.expire(now, expiration)
            obsolete = state.take_obsolete(p.segments[0].base_offset)
            if obsolete:
                self.writer.submit(p.directory, None, bytes, obsolete)
        if expired:
            log.info("Expired %d idle producer states (%s)", expired, EXPIRATION)
        return expired

    def close(self, partitions: Iterable[Any]) -> None:
        """Finish the queued snapshot work, then snapshot `partitions` at their log end (a
        clean shutdown) where anything was appended since their last snapshot."""
        self.writer.close()
        for p in partitions:
            state = self.state(p)
            offset = p.log_end_offset
            if offset <= max(state.snapshots[-1] if state.snapshots else 0, p.log_start_offset):
                continue  # Kafka's takeSnapshot: only past the last snapshot's offset
            try:
                # Not fsynced: a snapshot lost with the page cache fails its CRC at the next
                # start, which then rebuilds from an older one.
                snap.write(p.directory, offset, state.snapshot(), durable=False)
            except OSError as e:
                log.warning("Producer snapshot of %s not written: %s", p.directory, e)


def _replay_marker(p: Any, state: PartitionProducers, h: Any, control: int) -> None:
    """A COMMIT (1) or ABORT (0) marker met in the replay; an abort's index entry is
    written again unless it is there (a failure to write it is logged, not fatal)."""
    try:
        apply_state_batch(p, state, h, control)
    except (OSError, ValueError) as e:
        log.warning("Aborted-transaction index of %s not rebuilt at offset %d: %s",
                    p.directory, h.base_offset, e)
