# The consumer-group model of Kafka's classic GroupCoordinator (kafka.coordinator.group:
# GroupMetadata, MemberMetadata): states, members, protocol selection, committed offsets.
# No I/O here and no timer is started here: groups_join.py and groups_membership.py drive the
# state machine and its timers; a group only holds their handles, and cancels a member's when
# the member leaves it.
#
#   Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
#   CompletingRebalance --leader's SyncGroup--> Stable --join/leave/expiry--> PreparingRebalance
#   PreparingRebalance --nobody left--> Empty;  Empty --deleted / offsets expired--> Dead
from __future__ import annotations

import asyncio
import struct
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from ..clock import TimerHandle
from ..wire.errors import ErrorCode
from .offsets_records import OffsetValue

CONSUMER_PROTOCOL = "consumer"
_H = struct.Struct(">h")
_I = struct.Struct(">i")


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                     GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# A committed offset is exactly what its OffsetCommitValue record holds.
CommittedOffset = OffsetValue


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: asyncio.Future | None = None
    sync_waiter: asyncio.Future | None = None
    is_new: bool = False
    # Fires at the session deadline (or the new-member join timeout); reset by activity.
    heartbeat_timer: TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {candidates}")

    def stop_timer(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None

    def keeps_alive(self) -> bool:
        """Kafka's hasSatisfiedHeartbeat for an expired deadline: members waiting in a
        rebalance are not expected to heartbeat, except new ones that never completed a join."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)


class Group:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY):
        self.group_id = group_id
        self.state = state
        self.state_ms: int | None = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # MEMBER_ID_REQUIRED ids -> the timer that forgets them at their session timeout
        self.pending_members: dict[str, TimerHandle] = {}
        self.pending_sync: set[str] = set()
        self.supported: Counter[str] = Counter()
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.pending_commits = 0  # commits written, not yet replicated (offsets.py)
        # TxnOffsetCommit offsets by producer id, until the transaction's marker (offsets_txn)
        self.pending_txn: dict[int, dict[tuple[str, int], CommittedOffset]] = {}
        # Timers of the current rebalance and the kind of join wait.
        self.join_timer: TimerHandle | None = None
        self.initial_join = False
        self.initial_remaining_ms = 0
        self.sync_timer: TimerHandle | None = None

    def __repr__(self) -> str:
        return (f"Group({self.group_id!r}, {self.state.value}, generation {self.generation}, "
                f"{len(self.members)} members)")

    # --- state ----------------------------------------------------------------------------

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition "
                               f"{self.state.value} -> {state.value}")
        self.state = state
        self.state_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- members --------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def add(self, member: Member) -> None:
        if member.instance_id is not None:
            if member.instance_id in self.static_members:
                raise RuntimeError(f"static member {member.instance_id} is already in the group")
            self.static_members[member.instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported.update(name for name, _ in member.protocols)
        self.forget_pending(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported.subtract(name for name, _ in member.protocols)
            if member.instance_id is not None \
                    and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
            member.stop_timer()
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.forget_pending(member_id)
        self.pending_sync.discard(member_id)
        return member

    def forget_pending(self, member_id: str) -> None:
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def update_protocols(self, member: Member, protocols: list[tuple[str, bytes]],
                         rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self.supported.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self.supported.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id; whoever waits under the old id is fenced."""
        member = self.members.pop(old_id)
        fence_join(member, old_id)
        fence_sync(member)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for mid, m in self.members.items():
            if m.awaiting_join:
                self.leader_id = mid
                return True
        return False

    # --- protocols ------------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type \
            and any(self.supported[p] == n for p in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all members support; the
        most votes win (ties go to the earliest voter, Kafka leaves them unspecified)."""
        n = len(self.members)
        candidates = {p for p, c in self.supported.items() if c == n}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda p: votes[p])

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics |= subscription_topics(m.metadata(self.protocol_name))
        except (ValueError, KeyError, struct.error, UnicodeDecodeError):
            return None  # unknown: treated as subscribed to everything, as Kafka does
        return topics

    def is_subscribed(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        proto = self.protocol_name or ""
        return [(m.member_id, m.instance_id, m.metadata(proto)) for m in self.members.values()]

    def join_result(self, member: Member, *, members: bool, leader: str | None = None,
                    skip: bool = False) -> JoinResult:
        return JoinResult(ErrorCode.none, member.member_id, self.generation, self.protocol_type,
                          self.protocol_name, self.leader_id if leader is None else leader,
                          self.current_member_metadata() if members else [], skip)


def validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """Kafka's validateCurrentMember: a static member must be the instance's current
    member id (else it is a fenced duplicate); a dynamic one must be in the group."""
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return ErrorCode.unknown_member_id
        return ErrorCode.fenced_instance_id if current != member_id else None
    return None if member_id in group.members else ErrorCode.unknown_member_id


def fence_join(member: Member, member_id: str) -> None:
    answer_join(member, JoinResult(ErrorCode.fenced_instance_id, member_id))


def fence_sync(member: Member) -> None:
    answer_sync(member, SyncResult(ErrorCode.fenced_instance_id))


def answer_join(member: Member, result: JoinResult) -> bool:
    """Complete the member's waiting JoinGroup, if any; True if there was one."""
    waiter, member.join_waiter = member.join_waiter, None
    return _complete(waiter, result)


def answer_sync(member: Member, result: SyncResult) -> bool:
    """Complete the member's waiting SyncGroup, if any; True if there was one."""
    waiter, member.sync_waiter = member.sync_waiter, None
    return _complete(waiter, result)


def _complete(waiter: asyncio.Future | None, result: object) -> bool:
    if waiter is None:
        return False
    if not waiter.done():
        waiter.set_result(result)
    return True


def subscription_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocol Subscription, read through the v0 prefix every version
    shares (version i16, topics [string]), as Kafka's coordinator does."""
    pos = 2
    (count,) = _I.unpack_from(metadata, pos)
    pos += 4
    if count < 0 or count > len(metadata):
        raise ValueError("bad topic count")
    topics = set()
    for _ in range(count):
        (n,) = _H.unpack_from(metadata, pos)
        pos += 2
        if n < 0 or pos + n > len(metadata):
            raise ValueError("bad topic name")
        topics.add(metadata[pos:pos + n].decode())
        pos += n
    return topics
