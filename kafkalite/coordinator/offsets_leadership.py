# Which partitions of its internal topic a coordinator serves in a ZooKeeper cluster (issue 17,
# design step 8), the state machine both the group coordinator (__consumer_offsets) and the
# transaction coordinator (__transaction_state) follow, as Kafka's CoordinatorRuntime /
# TransactionStateManager keep their loading and owned partitions:
#
#   elect(p, epoch)   this broker became p's leader: p is loading (its keys answer
#                     COORDINATOR_LOAD_IN_PROGRESS) until `load(p)` has replayed it, then owned
#                     at that leader epoch (the coordinator epoch); a new epoch of an owned
#                     partition only moves the epoch
#   resign(p)         another broker leads p (or none): a load under way is cancelled, p is
#                     neither loading nor owned (NOT_COORDINATOR) and `unload(p)` drops its keys
#
# Leadership changes arrive in ZooKeeper's order on the event loop (cluster/
# coordinator_leadership.py), so no two calls race; a load runs as a task and yields between
# chunks. On one node there is no PartitionLeadership: every partition is loaded at start.
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ..wire.errors import ErrorCode

log = logging.getLogger("kafkalite.coordinator")


class PartitionLeadership:
    def __init__(self, topic: str, load: Callable[[int], Awaitable[None]],
                 unload: Callable[[int], None]):
        self.topic = topic
        self.owned: dict[int, int] = {}  # partition -> leader epoch
        self.loading: set[int] = set()
        self._load, self._unload = load, unload
        self._tasks: dict[int, asyncio.Task] = {}
        self._epochs: dict[int, int] = {}  # the epoch each load under way ends with

    def status(self, partition: int) -> ErrorCode | None:
        """None when `partition`'s keys are served here; else Kafka's error (loading first)."""
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        return None

    def epoch(self, partition: int) -> int:
        """The coordinator epoch of an owned partition, -1 otherwise."""
        return self.owned.get(partition, -1)

    def elect(self, partition: int, leader_epoch: int) -> None:
        if partition in self.owned:
            self.owned[partition] = leader_epoch
            return
        self._epochs[partition] = leader_epoch
        if partition in self.loading:
            return
        self.loading.add(partition)
        self._tasks[partition] = asyncio.get_running_loop().create_task(self._run(partition))

    async def _run(self, partition: int) -> None:
        try:
            await self._load(partition)
            self.owned[partition] = self._epochs[partition]
            log.info("Loaded %s-%d at coordinator epoch %d", self.topic, partition,
                     self.owned[partition])
        finally:
            self.loading.discard(partition)
            self._epochs.pop(partition, None)
            if self._tasks.get(partition) is asyncio.current_task():
                del self._tasks[partition]

    def resign(self, partition: int) -> None:
        task = self._tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        self.loading.discard(partition)
        self._epochs.pop(partition, None)
        self.owned.pop(partition, None)
        self._unload(partition)
        log.info("Unloaded %s-%d: no longer its leader", self.topic, partition)

    def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
