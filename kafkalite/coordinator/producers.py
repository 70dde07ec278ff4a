# Idempotent producers: producer-id allocation and per-partition sequence checks.
#
# As Kafka's ProducerStateManager: each partition remembers, per producer id, its epoch and
# the last five batches' (first seq, last seq, base offset). A retried batch that matches one
# of them is a duplicate and is acknowledged with its original offset; a gap or reordering is
# OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; a producer this
# partition has no state for may start at any sequence (KIP-360: its state may have expired).
# Sequences wrap from 2^31-1 to 0. State is snapshotted to `producer.snapshot` in the
# partition directory (at roll and clean shutdown) and rebuilt past the snapshot from batch
# headers, so it survives restarts and crashes.
from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field

from ..fileio import atomic_write
from ..wire.errors import ErrorCode, KafkaError

INT32_MAX = 2**31 - 1
CACHED_BATCHES = 5
SNAPSHOT = "producer.snapshot"


@dataclass
class _Entry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def _last_seq(base_seq: int, last_delta: int) -> int:
    s = base_seq + last_delta
    return s - INT32_MAX - 1 if s > INT32_MAX else s


class PartitionProducers:
    """Producer state of one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, _Entry] = {}
        self.snapshot_offset = 0

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
        last = _last_seq(base_seq, last_delta)
        for first_s, last_s, base_off in e.batches:
            if first_s == base_seq and last_s == last:
                return base_off
        if e.batches and base_seq != _next_seq(e.last_seq):
            raise KafkaError(ErrorCode.out_of_order_sequence_number,
                             f"Out of order sequence number for producer {pid}: {base_seq} "
                             f"(incoming), {e.last_seq} (current end sequence)")
        return None

    def update(self, pid: int, epoch: int, base_seq: int, last_delta: int,
               base_offset: int) -> None:
        e = self.producers.get(pid)
        if e is None or epoch != e.epoch:
            e = self.producers[pid] = _Entry(epoch)
        e.batches.append((base_seq, _last_seq(base_seq, last_delta), base_offset))

    # --- persistence ----------------------------------------------------------------------

    def save(self, directory: str, offset: int) -> None:
        data = {"offset": offset,
                "producers": {str(pid): [e.epoch, list(e.batches)]
                              for pid, e in self.producers.items()}}
        # Not fsynced: a lost snapshot only means a longer replay of batch headers at start.
        atomic_write(os.path.join(directory, SNAPSHOT), json.dumps(data).encode(),
                     durable=False)
        self.snapshot_offset = offset

    def load(self, directory: str) -> int:
        """Load the snapshot; returns the offset from which batches must be replayed."""
        try:
            with open(os.path.join(directory, SNAPSHOT)) as f:
                data = json.load(f)
            for pid, (epoch, batches) in data["producers"].items():
                e = self.producers[int(pid)] = _Entry(epoch)
                e.batches.extend(tuple(b) for b in batches)
            self.snapshot_offset = int(data["offset"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            self.producers.clear()
            self.snapshot_offset = 0
        return self.snapshot_offset


class ProducerIdAllocator:
    """Hands out producer ids, persisted in blocks so that no id is reused after a crash."""

    BLOCK = 1000

    def __init__(self, path: str):
        self.path = path
        self._next = 0
        self._limit = 0
        try:
            with open(path) as f:
                self._next = self._limit = int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            pass

    def allocate(self) -> int:
        if self._next >= self._limit:
            self._limit = self._next + self.BLOCK
            atomic_write(self.path, str(self._limit).encode())
        pid = self._next
        self._next += 1
        return pid
