# The transaction coordinator following the leadership of __transaction_state's partitions in
# a ZooKeeper cluster (issue 17, design step 8), as Kafka's TransactionCoordinator.onElection /
# onResignation: a transactional id lives on the leader of its partition. With zookeeper.connect
# the coordinator has a PartitionLeadership (offsets_leadership.py): an elected partition's ids
# are replayed from the local log (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and a transaction
# found prepared is completed; a resigned one's ids are dropped here and answer
# NOT_COORDINATOR, as those of every partition led elsewhere. The partition's leader epoch is
# the coordinator epoch its transaction markers carry. On one node every partition is loaded
# at start and the coordinator epoch is 0.
from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable

from ..wire.errors import ErrorCode as E
from .offsets_leadership import PartitionLeadership
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
        self.leadership = PartitionLeadership(self.log.name, self._load_partition,
                                              self._drop_partition) if clustered else None

    @property
    def loading_partitions(self) -> set[int]:
        return self.leadership.loading if self.leadership is not None else set()

    def _replay(self, partitions: Iterable[int] | None = None) -> Iterable[None]:
        raise NotImplementedError

    def _loaded(self, partitions: Iterable[int] | None = None) -> None:
        raise NotImplementedError

    def status(self, txn_id: str) -> E | None:
        """Whether this coordinator can answer for `txn_id` now: None, or
        COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR (Kafka's order)."""
        if self.loading:
            return E.coordinator_load_in_progress
        if self.leadership is not None:
            return self.leadership.status(self.log.partition_for(txn_id))
        return None

    def coordinator_epoch(self, txn_id: str) -> int:
        if self.leadership is None:
            return SINGLE_NODE_EPOCH
        return self.leadership.epoch(self.log.partition_for(txn_id))

    async def _load_partition(self, partition: int) -> None:
        try:
            for _ in self._replay([partition]):
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Loading __transaction_state-%d failed; serving what was read",
                          partition)
        # prepared transactions get their markers once the partition is owned (a later turn)
        asyncio.get_running_loop().call_soon(self._loaded, [partition])

    def _drop_partition(self, partition: int) -> None:
        for txn_id in [t for t in self.txns if self.log.partition_for(t) == partition]:
            meta = self.txns.pop(txn_id)
            if self.by_pid.get(meta.producer_id) is meta:
                del self.by_pid[meta.producer_id]
            self._unmarked.pop(txn_id, None)
