# Online migration between classic and KIP-848 consumer groups, by Kafka 4.x's rules
# (GroupMetadataManager with group.consumer.migration.policy):
#
# - Upgrade: the first ConsumerGroupHeartbeat to a classic group with members (protocol type
#   "consumer", no more members than group.consumer.max.size, the policy allowing it) turns
#   it into a consumer group. Its members keep their ids, their generation becomes their
#   member epoch and the group epoch, their current assignment their target; their pending
#   JoinGroup/SyncGroup get REBALANCE_IN_PROGRESS. The committed offsets stay where they are
#   (the member-less classic Group of the same id, as for every consumer group).
# - Classic members of a consumer group go on with JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
#   answered here: a JoinGroup is a heartbeat that carries the subscription (and the owned
#   partitions) in its embedded ConsumerProtocol metadata and answers at once with the
#   member epoch as generation and no leader; SyncGroup hands back the member's assigned
#   partitions; Heartbeat says REBALANCE_IN_PROGRESS while the member must rejoin to move
#   on (the group epoch moved past it, it has partitions to revoke, or partitions it waits
#   for are free). Their sessions run on their JoinGroup session timeout.
#   A classic member that sends no SyncGroup within its rebalance timeout after its
#   JoinGroup is fenced (Kafka's classicGroupSyncTimeout).
# - Downgrade: when a member is fenced (it left, its session or a timeout expired) and every
#   member left speaks the classic protocol, the policy allowing it and no more than
#   group.max.size of them, the consumer group turns back into a classic one (Kafka's
#   convertToClassicGroup): the consumer group's records are tombstoned, the classic group
#   takes the group epoch as generation, the members keep their ids, JoinGroup protocols
#   and session timeouts, each its target assignment, and a rebalance is prepared at once.
from __future__ import annotations

import logging
import struct
from typing import Any

from ..wire.errors import ErrorCode
from .consumer_group import (Assignment, ClassicInfo, ConsumerGroup, ConsumerMember,
                             MemberState, new_member_id)
from .groups import (Group, GroupState, JoinResult, Member, SyncResult, answer_join,
                     answer_sync)
from .groups_registry import StoreError

log = logging.getLogger("kafkalite.coordinator")
E = ErrorCode
PROTOCOL_TYPE = "consumer"
_H, _I = struct.Struct(">h"), struct.Struct(">i")


# --- the embedded ConsumerProtocol (Subscription v0-3, Assignment) ----------------------

class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._take(_H)

    def i32(self) -> int:
        return self._take(_I)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n:self.pos].decode()

    def more(self) -> bool:
        return self.pos < len(self.data)


def parse_subscription(metadata: bytes) -> tuple[int, tuple[str, ...], Assignment]:
    """(version, topics, owned partitions) of a ConsumerProtocolSubscription."""
    r = _Reader(metadata)
    version = r.i16()
    topics = tuple(r.string() or "" for _ in range(r.i32()))
    n = r.i32()  # user data
    r.pos += max(n, 0)
    owned: dict[str, frozenset[int]] = {}
    if version >= 1 and r.more():
        for _ in range(r.i32()):
            topic = r.string() or ""
            owned[topic] = frozenset(r.i32() for _ in range(r.i32()))
    return version, topics, owned


def encode_assignment(assigned: Assignment, version: int) -> bytes:
    """A ConsumerProtocolAssignment (version 0 or 1: the same layout) without user data."""
    out = bytearray(_H.pack(min(max(version, 0), 1)) + _I.pack(len(assigned)))
    for topic, ps in sorted(assigned.items()):
        name = topic.encode()
        out += _H.pack(len(name)) + name + _I.pack(len(ps))
        for p in sorted(ps):
            out += _I.pack(p)
    return bytes(out + _I.pack(-1))


class ClassicMembers:
    """The classic protocol's requests for a consumer group; `cg` is the
    ConsumerGroupCoordinator, `policy` group.consumer.migration.policy."""

    def __init__(self, cg: Any, policy: str):
        self.cg = cg
        self.policy = policy

    # --- upgrade ----------------------------------------------------------------------

    def can_upgrade(self, classic: Group) -> bool:
        if self.policy not in ("bidirectional", "upgrade"):
            log.info("Cannot upgrade classic group %s to consumer group because the online "
                     "upgrade is disabled.", classic.group_id)
            return False
        if classic.protocol_type != PROTOCOL_TYPE:
            log.info("Cannot upgrade classic group %s to consumer group because the group "
                     "does not use the consumer embedded protocol.", classic.group_id)
            return False
        return len(classic.members) <= self.cg.max_size

    def upgrade(self, classic: Group) -> ConsumerGroup:
        group = ConsumerGroup(classic.group_id)
        group.epoch = group.assignment_epoch = classic.generation
        for m in classic.members.values():
            try:
                meta = m.metadata(classic.protocol_name or "") if classic.protocol_name \
                    else m.protocols[0][1]
                _, topics, _ = parse_subscription(meta)
                _, assigned_topics, assigned = parse_subscription_assignment(m.assignment)
            except (struct.error, UnicodeDecodeError, IndexError, KeyError) as e:
                raise ValueError(f"malformed embedded consumer protocol: {e}") from None
            member = ConsumerMember(
                m.member_id, instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_names=tuple(sorted(set(topics))), epoch=classic.generation,
                previous_epoch=classic.generation, assigned=assigned,
                classic=ClassicInfo(m.session_timeout_ms, list(m.protocols)))
            group.add(member)
            group.target[m.member_id] = dict(assigned)
        group.subscription_metadata = self.cg._subscription_metadata(group)
        # The classic group gives up its members (its offsets stay); waiters rejoin.
        for m in classic.members.values():
            answer_join(m, JoinResult(E.rebalance_in_progress, m.member_id))
            answer_sync(m, SyncResult(E.rebalance_in_progress))
            m.stop_timer()
        for timer in (classic.join_timer, classic.sync_timer):
            if timer is not None:
                timer.cancel()
        classic.join_timer = classic.sync_timer = None
        classic.members, classic.static_members, classic.pending_sync = {}, {}, set()
        classic.supported.clear()
        classic.state, classic.leader_id, classic.protocol_name = GroupState.EMPTY, None, None
        self.cg.groups[group.group_id] = group
        for member in group.members.values():
            self.cg._schedule_session(group, member)
        self.cg.store.sync(group)
        log.info("Classic group %s upgraded to a consumer group at epoch %d (%d members)",
                 group.group_id, group.epoch, len(group.members))
        return group

    # --- downgrade ----------------------------------------------------------------------

    def can_downgrade(self, group: ConsumerGroup, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers for the member `leaving`."""
        if leaving not in group.members:
            return False
        rest = [m for m in group.members.values() if m.member_id != leaving]
        if not rest or any(m.classic is None for m in rest):
            return False
        if self.policy not in ("bidirectional", "downgrade"):
            log.info("Cannot downgrade consumer group %s to classic group because the online "
                     "downgrade is disabled.", group.group_id)
            return False
        if len(rest) > self.cg.registry.max_group_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group "
                     "size is greater than classic group max size.", group.group_id)
            return False
        return True

    def downgrade(self, group: ConsumerGroup, leaving: str) -> Group:
        registry = self.cg.registry
        for m in group.members.values():
            self.cg._cancel(m)
        self.cg.store.delete(group)
        del self.cg.groups[group.group_id]
        # The member-less classic group of the same id holds the offsets: it takes the members.
        classic = registry.groups.get(group.group_id)
        if classic is None or classic.is_(GroupState.DEAD):
            classic = registry.add_group(group.group_id)
        classic.state, classic.state_ms = GroupState.STABLE, registry.wall_ms()
        classic.generation, classic.protocol_type = group.epoch, PROTOCOL_TYPE
        classic.leader_id = None
        for m in group.members.values():
            if m.member_id != leaving and m.classic is not None:
                classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                                   m.rebalance_timeout_ms, m.classic.session_timeout_ms,
                                   PROTOCOL_TYPE, list(m.classic.protocols)))
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        assignment = {}
        for mid, cm in classic.members.items():
            meta = cm.metadata(classic.protocol_name)
            version = struct.unpack_from(">h", meta)[0] if len(meta) >= 2 else 0
            cm.assignment = assignment[mid] = encode_assignment(group.target.get(mid, {}),
                                                                version)
        if registry.store is not None:  # None: unit tests of the state machines
            try:
                registry.store_group(classic, assignment)
            except StoreError as e:  # the rebalance below writes the group again
                log.warning("Could not write the downgraded group %s: %s", group.group_id, e)
        membership = registry.membership
        for cm in classic.members.values():
            membership.schedule_heartbeat(classic, cm)
        membership.prepare_rebalance(classic, f"Downgrade group {group.group_id} from consumer "
                                     f"to classic for member leaving.")
        log.info("Consumer group %s downgraded to a classic group at generation %d "
                 "(%d members)", group.group_id, classic.generation, len(classic.members))
        return classic

    def _sync_expired(self, group: ConsumerGroup, member_id: str) -> None:
        member = self.cg._current(group, member_id)
        if member is not None and member.sync_timer is not None:
            member.sync_timer = None
            log.info("Consumer group %s: classic member %s fenced, it failed to sync within "
                     "its rebalance timeout", group.group_id, member_id)
            self.cg.fence(group, member_id)

    # --- the classic requests -----------------------------------------------------------

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerMember:
        member = group.static_member(instance_id) if instance_id is not None \
            else group.members.get(member_id)
        if member is None or member.classic is None:
            raise _Refused(E.unknown_member_id)
        if instance_id is not None and member.member_id != member_id:
            raise _Refused(E.fenced_instance_id)
        return member

    def join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
             require_known_id: bool, client_id: str, client_host: str, rebalance_ms: int,
             session_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]]
             ) -> JoinResult:
        unknown = member_id == ""
        if unknown:
            member_id = new_member_id()
        if len(group.members) >= self.cg.max_size and member_id not in group.members:
            return JoinResult(E.group_max_size_reached, member_id)
        if protocol_type != PROTOCOL_TYPE or not protocols:
            return JoinResult(E.inconsistent_group_protocol, member_id)
        if unknown and require_known_id:
            return JoinResult(E.member_id_required, member_id)
        member = group.members.get(member_id)
        if member is None:
            if not unknown:
                return JoinResult(E.unknown_member_id, member_id)
            member = ConsumerMember(member_id)
        elif member.classic is None:
            return JoinResult(E.unknown_member_id, member_id)
        try:
            _, topics, owned = parse_subscription(protocols[0][1])
        except (struct.error, UnicodeDecodeError) as e:
            log.info("Group %s: unreadable subscription from %s: %s", group.group_id,
                     member_id, e)
            return JoinResult(E.inconsistent_group_protocol, member_id)
        subscribed = tuple(sorted(set(topics)))
        changed = member_id not in group.members or subscribed != member.subscribed_names
        member.instance_id = instance_id or member.instance_id
        member.rebalance_timeout_ms = rebalance_ms
        member.subscribed_names, member.subscribed_regex = subscribed, None
        member.server_assignor = None
        member.client_id, member.client_host = client_id, client_host
        member.classic = ClassicInfo(session_ms, list(protocols))
        self.cg.advance(group, member, changed, owned)
        if member.sync_timer is not None:
            member.sync_timer.cancel()
        member.sync_timer = self.cg.clock.call_later(rebalance_ms, self._sync_expired, group,
                                                     member_id)
        return JoinResult(E.none, member_id, member.epoch, PROTOCOL_TYPE, protocols[0][0], "")

    def sync(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
             generation: int, protocol_type: str | None, protocol_name: str | None
             ) -> SyncResult:
        try:
            member = self._classic_member(group, member_id, instance_id)
        except _Refused as e:
            return SyncResult(e.code)
        assert member.classic is not None
        if generation != member.epoch:
            return SyncResult(E.illegal_generation)
        first = member.classic.protocols[0]
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name != first[0]):
            return SyncResult(E.inconsistent_group_protocol)
        if group.epoch > member.epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            return SyncResult(E.rebalance_in_progress)
        if member.sync_timer is not None:
            member.sync_timer.cancel()
            member.sync_timer = None
        self.cg._schedule_session(group, member)
        version = struct.unpack_from(">h", first[1])[0] if len(first[1]) >= 2 else 0
        return SyncResult(E.none, encode_assignment(member.assigned, version), PROTOCOL_TYPE,
                          first[0])

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        try:
            member = self._classic_member(group, member_id, instance_id)
        except _Refused as e:
            return e.code
        if generation != member.epoch:
            return E.illegal_generation
        self.cg._schedule_session(group, member)
        waiting = member.state == MemberState.UNRELEASED_PARTITIONS and any(
            group.owner(t, p, member.member_id) is None
            for t, ps in group.target.get(member.member_id, {}).items()
            for p in ps - member.assigned.get(t, frozenset()))
        if member.epoch < group.epoch or waiting or \
                member.state == MemberState.UNREVOKED_PARTITIONS:
            return E.rebalance_in_progress
        return E.none

    def leave(self, group: ConsumerGroup, member_id: str, instance_id: str | None
              ) -> ErrorCode:
        try:
            if member_id == "" and instance_id is not None:  # removal by instance id
                member = group.static_member(instance_id)
                if member is None or member.classic is None:
                    raise _Refused(E.unknown_member_id)
            else:
                member = self._classic_member(group, member_id, instance_id)
        except _Refused as e:
            return e.code
        log.info("Consumer group %s: classic member %s leaves", group.group_id,
                 member.member_id)
        self.cg.fence(group, member.member_id)
        return E.none


def parse_subscription_assignment(data: bytes) -> tuple[int, tuple[str, ...], Assignment]:
    """A ConsumerProtocolAssignment's (version, topics, partitions); empty bytes: none."""
    if not data:
        return 0, (), {}
    r = _Reader(data)
    version = r.i16()
    out: dict[str, frozenset[int]] = {}
    for _ in range(r.i32()):
        topic = r.string() or ""
        out[topic] = frozenset(r.i32() for _ in range(r.i32()))
    return version, tuple(out), out


class _Refused(Exception):
    def __init__(self, code: ErrorCode):
        super().__init__(code.name)
        self.code = code
