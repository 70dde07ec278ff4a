# The group coordinator following the leadership of __consumer_offsets' partitions in a
# ZooKeeper cluster (issue 17, design step 8), as Kafka's GroupCoordinator.onElection /
# onResignation: the groups of a partition live on its leader. When this broker becomes the
# leader (cluster/coordinator_leadership.py calls elect), the partition's groups and offsets
# are replayed from the local log, its groups answering COORDINATOR_LOAD_IN_PROGRESS
# meanwhile; when it stops (resign), they are dropped and answer NOT_COORDINATOR, as those of
# every partition led elsewhere (GroupRegistry.check_status). On one node (`owned` None)
# none of this runs: every partition is loaded at start.
from __future__ import annotations

import asyncio
import logging
from typing import Any

from .groups_registry import GroupRegistry
from .offsets_log import TOPIC

log = logging.getLogger("kafkalite.coordinator")


class GroupLeadership(GroupRegistry):
    membership: Any

    def __init__(self, config: Any, store: Any, clock: Any):
        super().__init__(config, store, clock)
        self._partition_loads: dict[int, asyncio.Task] = {}
        if config["zookeeper.connect"]:  # the groups follow partition leadership
            self.owned = {}

    async def load_partitions(self, partitions: list[int]) -> None:
        """Replay these partitions into groups (the coordinator's loader)."""
        raise NotImplementedError

    def cancel_loads(self) -> None:
        for task in self._partition_loads.values():
            task.cancel()

    def elect(self, partition: int, leader_epoch: int) -> None:
        """Kafka's onElection: this broker now leads `partition` of __consumer_offsets; its
        groups and offsets are loaded from the local log in the background (their requests
        meanwhile: COORDINATOR_LOAD_IN_PROGRESS). A new epoch of a partition held already
        only moves the epoch."""
        if self.owned is None or self.closed:
            return
        if partition in self.owned:
            self.owned[partition] = leader_epoch
            return
        if partition in self.loading_partitions:
            return
        self.loading_partitions.add(partition)
        task = asyncio.get_running_loop().create_task(self._load(partition, leader_epoch))
        self._partition_loads[partition] = task

    async def _load(self, partition: int, leader_epoch: int) -> None:
        try:
            await self.load_partitions([partition])
            self.owned[partition] = leader_epoch  # type: ignore[index]
        finally:
            self.loading_partitions.discard(partition)
            if self._partition_loads.get(partition) is asyncio.current_task():
                del self._partition_loads[partition]

    def resign(self, partition: int) -> None:
        """Kafka's onResignation: another broker leads `partition` now (or nobody): its
        groups are dropped, their waiting joins and syncs answered NOT_COORDINATOR, their
        timers stopped; requests for them get NOT_COORDINATOR from now on."""
        if self.owned is None:
            return
        task = self._partition_loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self.loading_partitions.discard(partition)
        self.owned.pop(partition, None)
        mine = self.store.partition_for
        for gid, group in list(self.groups.items()):
            if mine(gid) == partition:
                self.membership.shutdown(group)
                del self.groups[gid]
        for gid, cgroup in list(self.consumer_groups.items()):
            if mine(gid) == partition:
                for member in cgroup.members.values():
                    self.consumer_coordinator._cancel(member)
                del self.consumer_groups[gid]
        log.info("Unloaded the groups of %s-%d: no longer its leader", TOPIC, partition)

    def coordinator_epoch(self, group_id: str) -> int:
        """The leader epoch of the group's partition here (0 on one node)."""
        if self.owned is None:
            return 0
        return self.owned.get(self.store.partition_for(group_id), -1)
