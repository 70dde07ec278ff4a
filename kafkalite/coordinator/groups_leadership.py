# The group coordinator following the leadership of __consumer_offsets' partitions in a
# ZooKeeper cluster (issue 17, design step 8), as Kafka's GroupCoordinator.onElection /
# onResignation: the groups of a partition live on its leader. With zookeeper.connect the
# coordinator has a PartitionLeadership (offsets_leadership.py): an elected partition's groups
# and offsets are replayed from the local log (COORDINATOR_LOAD_IN_PROGRESS meanwhile); a
# resigned one's groups are dropped here, their waiting joins and syncs answered
# NOT_COORDINATOR and their timers stopped, and answer NOT_COORDINATOR from then on, as those
# of every partition led elsewhere (GroupRegistry.check_status). On one node none of this
# runs: every partition is loaded at start.
from __future__ import annotations

from typing import Any

from .groups_registry import GroupRegistry
from .offsets_leadership import PartitionLeadership
from .offsets_log import TOPIC


class GroupLeadership(GroupRegistry):
    membership: Any

    def __init__(self, config: Any, store: Any, clock: Any):
        super().__init__(config, store, clock)
        if config["zookeeper.connect"]:
            self.leadership = PartitionLeadership(TOPIC, self._load_partition,
                                                  self._drop_partition)

    async def load_partitions(self, partitions: list[int]) -> None:
        """Replay these partitions into groups (the coordinator's loader)."""
        raise NotImplementedError

    async def _load_partition(self, partition: int) -> None:
        await self.load_partitions([partition])

    def _drop_partition(self, partition: int) -> None:
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

    def coordinator_epoch(self, group_id: str) -> int:
        """The leader epoch of the group's partition here (0 on one node)."""
        if self.leadership is None:
            return 0
        return self.leadership.epoch(self.store.partition_for(group_id))
