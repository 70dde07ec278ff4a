# The state of one KIP-848 consumer group and its members, and the reconciliation of a
# member's assignment towards its target (Kafka's ConsumerGroup, ConsumerGroupMember and
# CurrentAssignmentBuilder in behaviour). No I/O, no clock: consumer_group_coordinator.py
# drives it.
#
# Epochs: the group epoch is bumped by every change of membership or subscriptions (and of the
# partitions of subscribed topics); the target assignment is recomputed for each new group
# epoch (assignment_epoch); a member's epoch reaches the target epoch once it holds its target.
# Reconciliation: a partition leaves its old owner first (UNREVOKED_PARTITIONS: the member
# keeps its epoch until a heartbeat's owned partitions no longer list it) and only then is
# given to its new owner (which meanwhile waits in UNRELEASED_PARTITIONS).
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable

from ..wire.errors import ErrorCode

from .consumer_assignors import Assignment

E = ErrorCode
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 url-safe base64 characters, never
    starting with '-' (v0 clients leave the member id to the coordinator)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


@dataclass
class ClassicInfo:
    """A member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup/
    Heartbeat), Kafka's ClassicMemberMetadata: its session timeout and JoinGroup protocols."""
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    classic: ClassicInfo | None = None
    # Timers (the clock's handles), owned by the coordinator.
    session_timer: Any = None
    rebalance_timer: Any = None
    sync_timer: Any = None  # a classic member's, from its JoinGroup to its SyncGroup

    def partitions(self) -> Iterable[tuple[str, int]]:
        """Every partition this member still holds: assigned or not yet revoked."""
        for t, ps in self.assigned.items():
            for p in ps:
                yield t, p
        for t, ps in self.revoking.items():
            for p in ps:
                yield t, p


class ConsumerGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.assignor: str = ""  # the assignor that computed the current target
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        # The partition counts of the subscribed topics the target was computed for.
        self.subscription_metadata: dict[str, int] = {}
        # Each subscribed regex's topics, as resolved with the authority of the member whose
        # heartbeat resolved it (Kafka's resolved regular expressions), and the topic names
        # they were resolved against; None until first resolved in this process.
        self.resolved: dict[str, frozenset[str]] | None = None
        self.resolved_against: frozenset[str] = frozenset()
        # What consumer_group_store.py last wrote to __consumer_offsets: value by key, and
        # the members it wrote records for.
        self.written: dict[bytes, bytes] = {}
        self.written_members: set[str] = set()

    def state(self) -> str:
        """Kafka's ConsumerGroupState names (Empty, Assigning, Reconciling, Stable)."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        for m in self.members.values():
            if m.epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def owner(self, topic: str, partition: int, other_than: str) -> str | None:
        """The member other than `other_than` that still holds the partition, if any."""
        for m in self.members.values():
            if m.member_id != other_than and (
                    partition in m.assigned.get(topic, ()) or
                    partition in m.revoking.get(topic, ())):
                return m.member_id
        return None

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        if member is not None and member.instance_id is not None \
                and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        return member

    def validate_commit(self, member_id: str, member_epoch: int,
                        api_version: int) -> ErrorCode | None:
        """ConsumerGroup.validateOffsetCommit: None when the commit may proceed."""
        if member_epoch < 0 and not self.members:
            return None  # admin tools and simple consumers committing to an empty group
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if member.classic is not None:  # its generation is its member epoch
            return E.illegal_generation if member_epoch != member.epoch else None
        if api_version < 9:
            return E.unsupported_version
        if member_epoch != member.epoch:
            return E.stale_member_epoch
        return None

    def validate_fetch(self, member_id: str | None,
                       member_epoch: int) -> ErrorCode | None:
        """ConsumerGroup.validateOffsetFetch: admin fetches (epoch -1, no member) pass."""
        if member_epoch < 0 and not member_id:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return E.unknown_member_id
        if member_epoch != member.epoch:
            return E.stale_member_epoch
        return None

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static.get(instance_id)
        return None if member_id is None else self.members.get(member_id)


def owned_map(owned: Iterable[tuple[str, Iterable[int]]] | None) -> Assignment | None:
    if owned is None:
        return None
    out: dict[str, set[int]] = {}
    for t, ps in owned:
        out.setdefault(t, set()).update(ps)
    return {t: frozenset(ps) for t, ps in out.items()}


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> bool:
    """Move `member` one step towards its target (CurrentAssignmentBuilder); `owned` is what
    the heartbeat reported (None: not sent). Returns True when the member changed."""
    target_epoch = group.assignment_epoch
    target = group.target.get(member.member_id, {})
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        # Still waiting for the client to give up its revoked partitions?
        if owned is None or any(ps & owned.get(t, frozenset())
                                for t, ps in member.revoking.items()):
            return False
    elif member.state == MemberState.STABLE and member.epoch == target_epoch:
        return False
    before = (member.epoch, member.state, member.assigned, member.revoking)
    kept: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    pending: dict[str, frozenset[int]] = {}
    for t in set(member.assigned) | set(target):
        cur = member.assigned.get(t, frozenset())
        want = target.get(t, frozenset())
        if cur & want:
            kept[t] = cur & want
        if cur - want:
            revoke[t] = cur - want
        if want - cur:
            pending[t] = want - cur
    if revoke and (owned is None or any(ps & owned.get(t, frozenset())
                                        for t, ps in revoke.items())):
        member.state = MemberState.UNREVOKED_PARTITIONS
        member.assigned, member.revoking = kept, revoke
    else:
        unreleased = False
        for t, ps in pending.items():
            free = frozenset(p for p in ps if group.owner(t, p, member.member_id) is None)
            unreleased = unreleased or free != ps
            if free:
                kept[t] = kept.get(t, frozenset()) | free
        member.state = (MemberState.UNRELEASED_PARTITIONS if unreleased
                        else MemberState.STABLE)
        member.assigned, member.revoking = kept, {}
        if member.epoch != target_epoch:
            member.previous_epoch, member.epoch = member.epoch, target_epoch
    return before != (member.epoch, member.state, member.assigned, member.revoking)

