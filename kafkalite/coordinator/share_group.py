# Share-group membership (KIP-932, Kafka 4.1's share groups in GroupMetadataManager), sans I/O.
#
# Members are identified by the id the client generates. A heartbeat with epoch 0 joins
# (or rejoins), -1 leaves, any other must equal the member's current epoch
# (FENCED_MEMBER_EPOCH otherwise; UNKNOWN_MEMBER_ID for a member the group does not know).
# Any change of membership, of a subscription or of a subscribed topic's partition count
# bumps the group epoch and recomputes the target assignment. Share groups revoke nothing
# (a partition may be read by several members at once), so a member moves straight to its
# target assignment and takes the group epoch as its member epoch.
#
# Assignment follows Kafka's SimpleAssignor for share groups: per topic, among the members
# subscribed to it, partitions are dealt round-robin when there are at least as many
# partitions as members; otherwise every member gets one partition, partitions being shared
# (member i reads partition i mod P). Sessions expire after group.share.session.timeout.ms
# on the injected clock.
#
# Membership is persisted in __consumer_offsets (share_group_records.py): `on_change(group,
# member id or None)` runs after each change, and a restart hands the replayed groups back
# (their members keep ids, epochs and assignments); arm_restored() then starts every
# restored member's session, so a member that never returns is fenced on its timeout.
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..clock import Clock, TimerHandle
from ..wire.errors import ErrorCode as E


class ShareGroupError(Exception):
    def __init__(self, code: E, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ShareMember:
    member_id: str
    epoch: int = 0
    previous_epoch: int = -1
    topics: tuple[str, ...] = ()
    rack: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: dict[str, tuple[int, ...]] = field(default_factory=dict)
    timer: TimerHandle | None = None


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # Partition counts of the subscribed topics when the assignment was computed.
    topic_sizes: dict[str, int] = field(default_factory=dict)
    target: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    # The records last written for this group, by key, and the members they cover.
    written: dict[bytes, bytes] = field(default_factory=dict)
    written_members: set[str] = field(default_factory=set)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}


def assign(members: dict[str, tuple[str, ...]], sizes: dict[str, int]
           ) -> dict[str, dict[str, tuple[int, ...]]]:
    """SimpleAssignor for share groups: {member: {topic: partitions}}; pure."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    for topic in sorted(sizes):
        readers = sorted(m for m, topics in members.items() if topic in topics)
        n = sizes[topic]
        if not readers or n <= 0:
            continue
        if n >= len(readers):
            for p in range(n):
                out[readers[p % len(readers)]].setdefault(topic, []).append(p)
        else:
            for i, m in enumerate(readers):
                out[m].setdefault(topic, []).append(i % n)
    return {m: {t: tuple(ps) for t, ps in a.items()} for m, a in out.items()}


class ShareGroups:
    """Every share group of the broker. `partitions_of(topic)` gives a topic's partition
    count (None if it does not exist); `settings(group_id)` the group's (session timeout
    ms, heartbeat interval ms); `on_member_gone(group_id, member_id)` runs when a member
    leaves or its session expires (its acquired records are released)."""

    def __init__(self, clock: Clock, partitions_of: Callable[[str], int | None],
                 settings: Callable[[str], tuple[int, int]], max_size: int,
                 on_member_gone: Callable[[str, str], Any] | None = None):
        self.clock = clock
        self.partitions_of = partitions_of
        self.settings = settings
        self.max_size = max_size
        self.on_member_gone = on_member_gone
        self.on_change: Callable[[ShareGroup, str | None], Any] | None = None
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                  rack: str | None, topics: tuple[str, ...] | None, client_id: str = "",
                  client_host: str = "") -> tuple[ShareMember | None, bool]:
        """(the member, whether its assignment must be sent); the member is None after a
        leave. Raises ShareGroupError."""
        if not group_id:
            raise ShareGroupError(E.invalid_request, "GroupId can't be empty.")
        if not member_id:
            raise ShareGroupError(E.invalid_request, "MemberId can't be empty.")
        if member_epoch < -1:
            raise ShareGroupError(E.invalid_request, f"MemberEpoch is invalid: {member_epoch}")
        if member_epoch == 0 and not topics:
            raise ShareGroupError(E.invalid_request,
                                  "SubscribedTopicNames must be set in first request.")
        group = self.groups.get(group_id)
        if member_epoch == -1:
            if group is not None and member_id in group.members:
                self._remove(group, member_id)
                return None, False
            raise ShareGroupError(E.unknown_member_id,
                                  f"Member {member_id} is not a member of group {group_id}.")
        member = group.members.get(member_id) if group is not None else None
        if member_epoch != 0:
            if member is None:
                raise ShareGroupError(E.unknown_member_id, f"Member {member_id} is not a "
                                      f"member of group {group_id}.")
            if member_epoch != member.epoch:
                raise ShareGroupError(E.fenced_member_epoch, "The share group member has a "
                                      "different epoch than the one the coordinator has.")
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        changed = False
        if member is None:
            if len(group.members) >= self.max_size:
                raise ShareGroupError(E.group_max_size_reached, f"The share group has "
                                      f"reached its maximum capacity of {self.max_size} members.")
            member = group.members[member_id] = ShareMember(member_id)
            changed = True
        if topics is not None and tuple(sorted(set(topics))) != member.topics:
            member.topics = tuple(sorted(set(topics)))
            changed = True
        if rack is not None and rack != member.rack:
            member.rack, changed = rack, True
        if (client_id, client_host) != (member.client_id, member.client_host):
            member.client_id, member.client_host = client_id, client_host
            changed = True
        sizes = {t: n for t in group.subscribed()
                 if (n := self.partitions_of(t)) is not None}
        if changed or sizes != group.topic_sizes:
            self._rebalance(group, sizes)
        # A member reaches the target only through its own heartbeat: the others learn
        # of a new group epoch at their next one, never fenced for not knowing it yet.
        moved = member.epoch != group.epoch
        if moved:
            member.previous_epoch, member.epoch = member.epoch, group.epoch
            member.assignment = group.target.get(member_id, {})
        if (changed or moved) and self.on_change is not None:
            self.on_change(group, member_id)
        self._arm(group, member)
        return member, member_epoch == 0 or moved

    def _rebalance(self, group: ShareGroup, sizes: dict[str, int]) -> None:
        group.epoch += 1
        group.topic_sizes = sizes
        group.target = assign({m.member_id: m.topics for m in group.members.values()}, sizes)

    def _arm(self, group: ShareGroup, member: ShareMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
        session_ms = self.settings(group.group_id)[0]
        member.timer = self.clock.call_later(session_ms, self._expire, group, member)

    def _expire(self, group: ShareGroup, member: ShareMember) -> None:
        if group.members.get(member.member_id) is member:
            self._remove(group, member.member_id)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        member = group.members.pop(member_id)
        if member.timer is not None:
            member.timer.cancel()
        sizes = {t: n for t in group.subscribed()
                 if (n := self.partitions_of(t)) is not None}
        self._rebalance(group, sizes)
        if self.on_change is not None:
            self.on_change(group, None)
        if self.on_member_gone is not None:
            self.on_member_gone(group.group_id, member_id)

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def arm_restored(self) -> int:
        """Start the session of every member replayed at start; how many there are."""
        n = 0
        for group in self.groups.values():
            for member in group.members.values():
                self._arm(group, member)
                n += 1
        return n

    def close(self) -> None:
        for group in self.groups.values():
            for m in group.members.values():
                if m.timer is not None:
                    m.timer.cancel()
