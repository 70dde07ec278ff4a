# One transactional id's state, as Kafka's TransactionMetadata keeps it, and the transitions
# between its states (no I/O: the coordinator in transactions_coordinator.py persists each
# transition to __transaction_state before applying it).
#
# Empty -> Ongoing (first AddPartitions/AddOffsets) -> PrepareCommit | PrepareAbort (EndTxn,
# written before any marker) -> CompleteCommit | CompleteAbort (after every marker) -> Ongoing
# again, or Empty after an InitProducerId (epoch bump). PrepareEpochFence is never written: it
# marks an Ongoing transaction that a new producer instance or the timeout is about to abort
# with a bumped epoch. Dead is the tombstone of an expired transactional id.
#
# As in Kafka, a transition is first *prepared* (a Transit, pending on the metadata: another
# request meanwhile gets CONCURRENT_TRANSACTIONS) and *completed* once written; a failed write
# only clears the pending transition.
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

NO_PRODUCER_ID = -1
NO_EPOCH = -1
SHORT_MAX = 32767


class TxnState(enum.IntEnum):
    """Kafka's TransactionState ids (the TransactionStatus byte of TransactionLogValue)."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> "TxnState | None":
        return _BY_NAME.get(name)


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
          TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
          TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
          TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _NAMES.items()}
S = TxnState
COMPLETE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
PREPARED = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
# Kafka's validPreviousStates of each state.
_VALID_FROM = {
    S.EMPTY: COMPLETE,
    S.ONGOING: (S.ONGOING, *COMPLETE),
    S.PREPARE_COMMIT: (S.ONGOING,),
    S.PREPARE_ABORT: (S.ONGOING, S.PREPARE_EPOCH_FENCE),
    S.COMPLETE_COMMIT: (S.PREPARE_COMMIT,),
    S.COMPLETE_ABORT: (S.PREPARE_ABORT,),
    S.DEAD: COMPLETE,
    S.PREPARE_EPOCH_FENCE: (S.ONGOING,),
}
EXPIRABLE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

Partition = tuple[str, int]


def epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out Short.MAX_VALUE, so the coordinator can always fence once more."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class Transit:
    """The state a transition leads to: what is written to __transaction_state."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[Partition]
    start_ms: int  # wall time the transaction started, -1 when none
    update_ms: int  # wall time of this transition


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH
    last_producer_epoch: int = NO_EPOCH
    timeout_ms: int = 60000
    state: TxnState = S.EMPTY
    partitions: set[Partition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    pending: Transit | None = None
    failed_epoch_fence: bool = False
    # Monotonic deadlines (the wall times above are what Kafka stores and shows; timers run
    # on the monotonic clock so that a wall-clock step fires nothing).
    timeout_deadline: int | None = None
    expiry_deadline: int | None = None

    def transit(self) -> Transit:
        return Transit(self.producer_id, self.last_producer_id, self.producer_epoch,
                       self.last_producer_epoch, self.timeout_ms, self.state,
                       frozenset(self.partitions), self.start_ms, self.update_ms)

    # --- preparing transitions (Kafka's prepare*) --------------------------------------------

    def _prepare(self, state: TxnState, **changes) -> Transit:
        if self.pending is not None:
            raise IllegalState(f"{self.transactional_id}: transition to {state.kafka_name} "
                               f"while {self.pending.state.kafka_name} is pending")
        if self.state not in _VALID_FROM[state]:
            raise IllegalState(f"{self.transactional_id}: {self.state.kafka_name} -> "
                               f"{state.kafka_name} is not a valid transition")
        t = replace(self.transit(), state=state, **changes)
        self.pending = t
        return t

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now_ms: int) -> Transit | None:
        """InitProducerId on a complete transaction; None when the caller is fenced."""
        if epoch_exhausted(self.producer_epoch):
            raise IllegalState(f"no epochs left for producer {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_EPOCH
        elif self.producer_epoch == NO_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch  # KIP-360: recovering producer
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retried bump
        else:
            return None
        return self._prepare(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                             update_ms=now_ms)

    def prepare_rotation(self, new_pid: int, timeout_ms: int, now_ms: int,
                         record_last_epoch: bool) -> Transit:
        """A fresh producer id once the epochs of this one are used up."""
        return self._prepare(S.EMPTY, producer_id=new_pid, last_producer_id=self.producer_id,
                             producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch
                             else NO_EPOCH, timeout_ms=timeout_ms, partitions=frozenset(),
                             start_ms=-1, update_ms=now_ms)

    def prepare_fence(self) -> Transit:
        """Bump the epoch of an Ongoing transaction that is about to be aborted (a new
        instance of the producer, or the timeout): the old instance is fenced by it."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalState(f"cannot fence producer {self.producer_id} at epoch {SHORT_MAX}")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                             last_producer_epoch=NO_EPOCH)

    def prepare_add_partitions(self, added: set[Partition], now_ms: int) -> Transit:
        start = now_ms if self.state in COMPLETE else self.start_ms
        return self._prepare(S.ONGOING, partitions=frozenset(self.partitions | added),
                             start_ms=start, update_ms=now_ms)

    def prepare_end(self, commit: bool, now_ms: int) -> Transit:
        fence = self.pending
        if fence is not None and fence.state == S.PREPARE_EPOCH_FENCE and not commit:
            # As Kafka: the fence's bumped epoch goes into the PrepareAbort written now.
            self.pending = None
            self.producer_epoch = fence.producer_epoch
            self.last_producer_epoch = NO_EPOCH
        return self._prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, update_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> Transit:
        self.failed_epoch_fence = False
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._prepare(state, partitions=frozenset(), update_ms=now_ms)

    def prepare_dead(self) -> Transit:
        return self._prepare(S.DEAD, partitions=frozenset())

    # --- completing ---------------------------------------------------------------------------

    def complete(self, t: Transit) -> None:
        """Apply a prepared transition once it is written."""
        if self.pending != t:
            raise IllegalState(f"{self.transactional_id}: completing a transition that is not "
                               f"the pending one")
        self.apply(t)
        self.pending = None

    def abort_pending(self) -> None:
        """The write of the pending transition failed: forget it."""
        self.pending = None

    def apply(self, t: Transit) -> None:
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state = t.timeout_ms, t.state
        self.partitions = set(t.partitions)
        self.start_ms, self.update_ms = t.start_ms, t.update_ms


class IllegalState(Exception):
    """A transition Kafka's state machine forbids: a bug, never a client's error."""
