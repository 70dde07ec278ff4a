# What the halves of the group coordinator share: the groups of this broker, the settings
# they are checked against, the injected clock, and the writes of group metadata to
# __consumer_offsets. groups_join.py, groups_membership.py and offsets.py are written against
# this class and never import the coordinator (groups_coordinator.py), which extends it with
# the lifecycle and the API entry points: imports point one way, down to here.
#
# Time: every deadline and timer uses clock.monotonic_ms()/call_later, so a step of the
# wall clock moves none of them; wall_ms() is only for what Kafka stores or shows as a time
# of day (commit and group-state timestamps, offsets retention, which Kafka bases on those).
from __future__ import annotations

import asyncio
from typing import Any, Callable

from ..clock import Clock
from ..wire.errors import ErrorCode
from .groups import Group
from .offsets_log import NotReplicated, OffsetsLog
from .offsets_records import GroupValue, MemberValue, group_key, group_value

E = ErrorCode
_NO_ISR = (E.not_enough_replicas, E.not_enough_replicas_after_append)
# GroupMetadataManager.storeGroup's mapping of the append's error (its offsets' differs in
# REQUEST_TIMED_OUT: a group write that timed out asks the members to rebalance)
_GROUP_WRITE = {E.unknown_topic_or_partition: E.coordinator_not_available,
                E.not_enough_replicas: E.coordinator_not_available,
                E.not_enough_replicas_after_append: E.coordinator_not_available,
                E.not_leader_or_follower: E.not_coordinator,
                E.kafka_storage_error: E.not_coordinator,
                E.request_timed_out: E.rebalance_in_progress}


class StoreError(Exception):
    """A group or offset write to __consumer_offsets failed; `code` is the client's error."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


def store_error(e: Exception) -> StoreError:
    """Kafka's maybeConvertOffsetCommitError: a failed local write means this broker cannot
    act as coordinator right now; an oversized batch is an unknown server error. A write the
    ISR did not take (a cluster's), as GroupMetadataManager.storeOffsets maps it."""
    if isinstance(e, NotReplicated):
        return StoreError(E.not_coordinator if e.code == E.not_leader_or_follower else
                          E.coordinator_not_available if e.code in _NO_ISR else E(e.code), str(e))
    if isinstance(e, OSError):  # the log's StorageError included
        return StoreError(E.not_coordinator, str(e))
    return StoreError(E.unknown_server_error, str(e))


class GroupRegistry:
    def __init__(self, config: Any, store: OffsetsLog, clock: Clock):
        self.min_session_ms: int = config["group.min.session.timeout.ms"]
        self.max_session_ms: int = config["group.max.session.timeout.ms"]
        self.max_group_size: int = config["group.max.size"]
        self.initial_delay_ms: int = config["group.initial.rebalance.delay.ms"]
        self.metadata_max_bytes: int = config["offset.metadata.max.bytes"]
        self.retention_ms: int = config["offsets.retention.minutes"] * 60_000
        self.retention_check_ms: int = config["offsets.retention.check.interval.ms"]
        self.store = store
        self.clock = clock
        self.groups: dict[str, Group] = {}
        # KIP-848 groups (consumer_group.py's ConsumerGroup), by id; one namespace with
        # `groups`: the offsets of a consumer group live in a member-less classic Group of the
        # same id (offsets.py stores and expires them unchanged), which group_type hides.
        self.consumer_groups: dict[str, Any] = {}
        self.consumer_coordinator: Any = None  # consumer_group_coordinator.py's, once made
        # Whether a KIP-932 share group holds an id (the share coordinator's has_group, set
        # by the broker when it makes that coordinator): share groups live there.
        self.share_lookup: Callable[[str], bool] | None = None
        self.loading = False
        self.closed = False
        self._writes: set[asyncio.Future] = set()  # group writes waiting for the ISR
        # In a cluster, the __consumer_offsets partitions this broker coordinates (an
        # offsets_leadership.PartitionLeadership); None on one node: every group is here.
        self.leadership: Any = None

    def group_type(self, group_id: str) -> str | None:
        """The one lookup of the shared group-id namespace: "consumer" (KIP-848),
        "classic", "share" (KIP-932, through share_lookup), or None when no live group has
        this id. Every group kind asks it before claiming an id."""
        if group_id in self.consumer_groups:
            return "consumer"
        group = self.groups.get(group_id)
        if group is not None and group.state.value != "Dead":
            return "classic"
        if self.share_lookup is not None and self.share_lookup(group_id):
            return "share"
        return None

    def release_consumer_group(self, group_id: str) -> bool:
        """Before a classic JoinGroup: an empty consumer group gives its id back to the
        classic protocol (its offsets stay); False while it has members (Kafka 4.x without
        online migration answers INCONSISTENT_GROUP_PROTOCOL)."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            return True
        if group.members:
            return False
        del self.consumer_groups[group_id]
        if self.consumer_coordinator is not None:  # tombstones, or it would come back
            self.consumer_coordinator.store.delete(group)
        return True

    def wall_ms(self) -> int:
        return self.clock.wall_ms()

    def check_status(self, group_id: str | None, allow_empty_id: bool) -> ErrorCode | None:
        """Kafka's validateGroupStatus. OffsetCommit/OffsetFetch/DescribeGroups/DeleteGroups
        accept the empty group id (for old clients); the membership APIs do not."""
        if group_id is None or (not group_id and not allow_empty_id):
            return E.invalid_group_id
        if self.closed:
            return E.coordinator_not_available
        if self.loading:
            return E.coordinator_load_in_progress
        if self.leadership is not None:
            return self.leadership.status(self.store.partition_for(group_id))
        return None

    @property
    def loading_partitions(self) -> set[int]:
        return self.leadership.loading if self.leadership is not None else set()

    def add_group(self, group_id: str) -> Group:
        group = Group(group_id, self.wall_ms())
        self.groups[group_id] = group
        return group

    def remove_group(self, group: Group) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def is_current(self, group: Group) -> bool:
        """False once `group` was removed (or replaced): its timers then do nothing."""
        return not self.closed and self.groups.get(group.group_id) is group

    def group_value(self, group: Group, assignment: dict[str, bytes] | None) -> GroupValue:
        members = []
        if assignment is not None and group.protocol_name is not None:
            members = [MemberValue(m.member_id, m.instance_id, m.client_id, m.client_host,
                                   m.rebalance_timeout_ms, m.session_timeout_ms,
                                   m.metadata(group.protocol_name),
                                   assignment.get(m.member_id, b""))
                       for m in group.members.values()]
        return GroupValue(group.protocol_type or "", group.generation, group.protocol_name,
                          group.leader_id, group.state_ms if group.state_ms else -1, members)

    def persist_group(self, group: Group, assignment: dict[str, bytes],
                      done: Callable[[ErrorCode], None]) -> None:
        """store_group as Kafka's storeGroup with its callback: `done(error)` once the write
        is replicated (in a cluster the ISR's answer after the high watermark passed it, or
        the error, mapped as storeGroup maps it), at once on a single node or when nothing
        could be written."""
        try:
            self.store_group(group, assignment)
        except StoreError as e:
            done(e.code)
            return
        if self.store.replication() is None:
            done(E.none)
            return
        task = asyncio.ensure_future(self.store.replicated(
            self.store.partition_for(group.group_id)))
        self._writes.add(task)

        def replicated(t: asyncio.Future) -> None:
            self._writes.discard(t)
            if not t.cancelled():
                code = E(t.result())
                done(_GROUP_WRITE.get(code, code))
        task.add_done_callback(replicated)

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
        value = group_value(self.group_value(group, assignment))
        try:
            self.store.append(group.group_id, [(group_key(group.group_id), value)],
                              self.wall_ms())
        except (OSError, ValueError) as e:
            raise store_error(e) from e
