# The transaction coordinator following the leadership of __transaction_state's partitions in
# a ZooKeeper cluster (issue 17, design step 8), as Kafka's TransactionCoordinator.onElection /
# onResignation: a transactional id lives on the leader of its partition. When this broker
# becomes the leader (cluster/coordinator_leadership.py calls elect), the partition's ids are
# replayed from the local log (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and a transaction found
# prepared is completed; when it stops (resign), its ids are dropped and answer NOT_COORDINATOR,
# as those of every partition led elsewhere. The partition's leader epoch is the coordinator
# epoch its transaction markers carry. On one node (`owned` None) every partition is loaded at
# start and the coordinator epoch is 0.
from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable

from ..wire.errors import ErrorCode as E
from .transactions import TransactionMetadata

log = logging.getLogger("kafkalite.transactions")

SINGLE_NODE_EPOCH = 0  # one broker: never a new leader of __transaction_state


class TxnLeadership:
    log: Any  # TransactionLog
    loading: bool
    txns: dict[str, TransactionMetadata]
    by_pid: dict[int, TransactionMetadata]
    _unmarked: dict[str, set]

    def init_leadership(self, clustered: bool) -> None:
        # the partitions led here, each with its leader epoch; None: every one (one node)
        self.owned: dict[int, int] | None = {} if clustered else None
        self.loading_partitions: set[int] = set()
        self._partition_loads: dict[int, asyncio.Task] = {}

    def _replay(self, partitions: Iterable[int] | None = None) -> Iterable[None]:
        raise NotImplementedError

    def _loaded(self, partitions: Iterable[int] | None = None) -> None:
        raise NotImplementedError

    def status(self, txn_id: str) -> E | None:
        """Whether this coordinator can answer for `txn_id` now: None, or
        COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR (Kafka's order)."""
        if self.loading:
            return E.coordinator_load_in_progress
        if self.owned is not None:
            partition = self.log.partition_for(txn_id)
            if partition in self.loading_partitions:
                return E.coordinator_load_in_progress
            if partition not in self.owned:
                return E.not_coordinator
        return None

    def coordinator_epoch(self, txn_id: str) -> int:
        if self.owned is None:
            return SINGLE_NODE_EPOCH
        return self.owned.get(self.log.partition_for(txn_id), -1)

    def elect(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads `partition`: load its ids in the background. A new epoch of
        a partition held already only moves the coordinator epoch."""
        if self.owned is None:
            return
        if partition in self.owned:
            self.owned[partition] = leader_epoch
            return
        if partition in self.loading_partitions:
            return
        self.loading_partitions.add(partition)
        self._partition_loads[partition] = asyncio.get_running_loop().create_task(
            self._load(partition, leader_epoch))

    async def _load(self, partition: int, leader_epoch: int) -> None:
        try:
            try:
                for _ in self._replay([partition]):
                    await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Loading __transaction_state-%d failed; serving what was read",
                              partition)
            self.loading_partitions.discard(partition)
            self.owned[partition] = leader_epoch  # type: ignore[index]
            self._loaded([partition])
        finally:
            self.loading_partitions.discard(partition)
            if self._partition_loads.get(partition) is asyncio.current_task():
                del self._partition_loads[partition]

    def resign(self, partition: int) -> None:
        """Another broker leads `partition` now (or nobody): forget its ids."""
        if self.owned is None:
            return
        task = self._partition_loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self.loading_partitions.discard(partition)
        self.owned.pop(partition, None)
        for txn_id in [t for t in self.txns if self.log.partition_for(t) == partition]:
            meta = self.txns.pop(txn_id)
            if self.by_pid.get(meta.producer_id) is meta:
                del self.by_pid[meta.producer_id]
            self._unmarked.pop(txn_id, None)
        log.info("Unloaded the transactional ids of __transaction_state-%d: no longer its "
                 "leader", partition)

    def cancel_loads(self) -> None:
        for task in self._partition_loads.values():
            task.cancel()
