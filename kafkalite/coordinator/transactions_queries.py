# The transaction coordinator's read-only answers: the verify-only AddPartitionsToTxn and
# Produce's verification (KIP-890), DescribeTransactions, ListTransactions, the metrics'
# count. A mixin of TransactionCoordinator (its `txns`, `by_pid`, `loading`, `clock`).
from __future__ import annotations

import re
from typing import Iterable

from ..clock import Clock
from ..wire.errors import ErrorCode as E
from .transactions import PREPARED, Partition, TransactionMetadata, TxnState as S


# PRODUCER_FENCED and TRANSACTION_ABORTABLE as AddPartitionsToTxnManager translates them; a
# coordinator that cannot answer yet is NOT_ENOUGH_REPLICAS, retriable for every producer
# (ReplicaManager's "Unable to verify the partition has been added to the transaction").
_FOR_PRODUCE = {E.producer_fenced: E.invalid_producer_epoch,
                E.transaction_abortable: E.invalid_txn_state,
                E.concurrent_transactions: E.not_enough_replicas,
                E.coordinator_load_in_progress: E.not_enough_replicas}


class TransactionQueries:
    txns: dict[str, TransactionMetadata]
    by_pid: dict[int, TransactionMetadata]
    loading: bool
    loading_partitions: set[int]
    clock: Clock

    def _check_producer(self, txn_id: str, pid: int, epoch: int
                        ) -> tuple[E, TransactionMetadata | None]:
        raise NotImplementedError

    def status(self, txn_id: str) -> E | None:
        raise NotImplementedError

    def verify(self, txn_id: str, pid: int, epoch: int, partitions: Iterable[Partition]
               ) -> dict[Partition, E]:
        """The verify-only AddPartitionsToTxn (KIP-890): which partitions the ongoing
        transaction has, changing nothing; TRANSACTION_ABORTABLE for the others, as 3.8."""
        partitions = list(partitions)
        err, meta = self._check_producer(txn_id, pid, epoch)
        if meta is not None and meta.state in PREPARED:
            err, meta = E.concurrent_transactions, None
        if meta is None:
            return {tp: err for tp in partitions}
        return {tp: E.none if tp in meta.partitions else E.transaction_abortable
                for tp in partitions}

    def verify_partition(self, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> E:
        """For TxnOffsetCommit, by producer id (Produce uses verify_produce): NONE when the producer's ongoing transaction has
        this partition. Otherwise INVALID_PRODUCER_EPOCH for another epoch (Kafka's
        AddPartitionsToTxnManager turns the coordinator's PRODUCER_FENCED into it) and
        INVALID_TXN_STATE for a partition not added or no ongoing transaction (what Kafka 3.8
        answers a Produce for TRANSACTION_ABORTABLE and for an unknown producer)."""
        meta = self.by_pid.get(producer_id)
        if meta is None or meta.producer_id != producer_id:
            return E.invalid_txn_state
        if meta.producer_epoch != producer_epoch:
            return E.invalid_producer_epoch
        if meta.state in PREPARED:
            return E.concurrent_transactions
        if meta.state == S.ONGOING and (topic, partition) in meta.partitions:
            return E.none
        return E.invalid_txn_state

    def verify_produce(self, txn_id: str, producer_id: int, producer_epoch: int, topic: str,
                       partition: int) -> E:
        """Produce's verification as Kafka 3.8 runs it: the verify-only AddPartitionsToTxn
        for the request's transactional id (a batch of another id's producer is
        INVALID_PRODUCER_ID_MAPPING, measured), its answer translated as Kafka's
        AddPartitionsToTxnManager and ReplicaManager do for producers."""
        if self.status(txn_id) == E.not_coordinator:
            # coordinated by another broker of the cluster: Kafka would ask it over the
            # network (AddPartitionsToTxnManager); not done yet, the batch is not verified
            return E.none
        err = self.verify(txn_id, producer_id, producer_epoch, [(topic, partition)])
        code = err[(topic, partition)]
        return _FOR_PRODUCE.get(code, code)

    # --- describing -----------------------------------------------------------------------

    def describe(self, txn_id: str) -> tuple[E, TransactionMetadata | None]:
        if self.loading:
            return E.coordinator_load_in_progress, None
        if txn_id == "":
            return E.invalid_request, None
        status = self.status(txn_id)
        if status is not None:
            return status, None
        meta = self.txns.get(txn_id)
        if meta is None or meta.state == S.DEAD:
            return E.transactional_id_not_found, None
        return E.none, meta

    def list(self, producer_ids: Iterable[int], states: Iterable[str], duration_ms: int = -1,
             id_pattern: str | None = None
             ) -> tuple[E, list[TransactionMetadata], list[str]]:
        """ListTransactions: (error, matches, unknown state names), Kafka's filters; the id
        pattern (v2, KIP-1152) must match the whole id, "" or None matching all."""
        if self.loading or self.loading_partitions:
            return E.coordinator_load_in_progress, [], []
        try:
            pattern = re.compile(id_pattern) if id_pattern else None
        except re.error:
            return E.invalid_regular_expression, [], []
        pids = set(producer_ids)
        names = list(states)
        wanted = {S.from_name(n) for n in names} - {None}
        unknown = [n for n in names if S.from_name(n) is None]
        now = self.clock.wall_ms()
        out = [m for m in self.txns.values()
               if m.state != S.DEAD and (not pids or m.producer_id in pids)
               and (not names or m.state in wanted)
               and not (duration_ms >= 0 and now - m.start_ms <= duration_ms)
               and (pattern is None or pattern.fullmatch(m.transactional_id))]
        return E.none, out, unknown

    @property
    def open_transactions(self) -> int:
        return sum(1 for m in self.txns.values() if m.state in (S.ONGOING, *PREPARED))
