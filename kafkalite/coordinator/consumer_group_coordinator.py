# The KIP-848 group coordinator: ConsumerGroupHeartbeat handling for `group.protocol=consumer`
# groups, beside the classic coordinator (groups_coordinator.py), in the same group-id
# namespace (GroupRegistry.consumer_groups / group_type), as Kafka's GroupMetadataManager.
#
# A heartbeat creates or updates its member (epoch 0 joins, -1 leaves, -2 is a static member
# leaving for now), bumps the group epoch when membership, subscriptions or the partitions of
# the subscribed topics changed, recomputes the target assignment for a new group epoch with
# the server-side assignor (the members' most chosen ServerAssignor, else the first of
# group.consumer.assignors), then reconciles the member (consumer_group.py). Topic changes are
# seen at the next heartbeat of any member: no rejoin. A subscribed regex resolves to the
# topics the resolving member may DESCRIBE (_resolve_regexes, as Kafka 4.x).
#
# Timers run on the injected clock: a member not heard from for
# group.consumer.session.timeout.ms is fenced (removed; its partitions go back to the pool at
# once), as is one that holds partitions to revoke past its rebalance timeout. The ids of the
# group-id namespace: an empty classic group becomes a consumer group on the first heartbeat
# (its committed offsets kept); a classic group with members is upgraded online when
# group.consumer.migration.policy allows it (consumer_group_classic.py, which also serves
# its classic members), else answers GROUP_ID_NOT_FOUND.
# Every change is written to __consumer_offsets and replayed at start
# (consumer_group_store.py): members come back with their ids, epochs and assignments.
# The coordinator is made with the classic one (groups_coordinator.py), so the members
# replayed at start get their session timers when the load ends, whether or not they return.
# A group's GROUP-resource configs consumer.session.timeout.ms / consumer.heartbeat.interval.ms
# (`overrides`) replace the broker's group.consumer.* settings for it, read at each heartbeat
# as Kafka's GroupConfigManager is.
from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable, Mapping

from ..wire.errors import ErrorCode
from .consumer_assignors import ASSIGNORS, MemberSpec, configured
from .consumer_group import (LEAVE_EPOCH, STATIC_LEAVE_EPOCH, Assignment, ConsumerGroup,
                             ConsumerMember, MemberState, new_member_id, reconcile)
from .consumer_group_classic import ClassicMembers
from .consumer_group_store import ConsumerGroupStore
from .consumer_heartbeat import (Heartbeat, HeartbeatAnswer, HeartbeatError, check_epoch,
                                 validate)
from .consumer_subscriptions import resolve_regexes, resolved_regexes, subscribed_topics
from .groups_registry import GroupRegistry


log = logging.getLogger("kafkalite.coordinator")
E = ErrorCode

# name -> (partition count, internal)
TopicsFn = Callable[[], Mapping[str, tuple[int, bool]]]
# group id -> its GROUP-resource config overrides (group_configs.py), as strings
OverridesFn = Callable[[str], Mapping[str, str]]


class ConsumerGroupCoordinator:
    def __init__(self, registry: GroupRegistry, config: Any, topics: TopicsFn,
                 overrides: OverridesFn | None = None):
        self.registry = registry
        self.clock = registry.clock
        self.topics = topics
        self.overrides: OverridesFn = overrides or (lambda group_id: {})
        self.session_ms: int = config["group.consumer.session.timeout.ms"]
        self.heartbeat_ms: int = config["group.consumer.heartbeat.interval.ms"]
        self.max_size: int = config["group.consumer.max.size"]
        self.assignors = configured(
            [a for a in config["group.consumer.assignors"].split(",") if a.strip()])
        self.store = ConsumerGroupStore(registry.store, registry.wall_ms)
        self.classic = ClassicMembers(self, config["group.consumer.migration.policy"])
        registry.consumer_coordinator = self
        self.arm_restored()

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self.registry.consumer_groups

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(self, hb: Heartbeat) -> HeartbeatAnswer:
        """Raises HeartbeatError with Kafka's error and message."""
        validate(hb, self.assignors)
        err = self.registry.check_status(hb.group_id, allow_empty_id=False)
        if err is not None:
            raise HeartbeatError(err, "")
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(hb)
        return self._heartbeat(hb)

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.registry.groups.get(group_id)
        if self.registry.group_type(group_id) == "share":
            raise HeartbeatError(E.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
        if classic is not None and classic.members:
            if not create or not self.classic.can_upgrade(classic):
                raise HeartbeatError(E.group_id_not_found,
                                     f"Group {group_id} is not a consumer group.")
            try:
                return self.classic.upgrade(classic)
            except ValueError as e:
                raise HeartbeatError(E.group_id_not_found,
                                     f"Cannot upgrade the classic group {group_id} to "
                                     f"consumer group because the embedded consumer protocol "
                                     f"is malformed: {e}.") from None
        if not create:
            raise HeartbeatError(E.group_id_not_found, f"Group {group_id} not found.")
        group = ConsumerGroup(group_id)
        self.groups[group_id] = group
        return group

    def _heartbeat(self, hb: Heartbeat) -> HeartbeatAnswer:
        joining = hb.member_epoch == 0
        group = self._group(hb.group_id, create=joining)
        member_id = hb.member_id or new_member_id()
        if len(group.members) >= self.max_size and member_id not in group.members:
            raise HeartbeatError(E.group_max_size_reached,
                                 "The consumer group has reached its maximum capacity of "
                                 f"{self.max_size} members.")
        replaced: ConsumerMember | None = None
        if hb.instance_id is None:
            member = self._member(group, member_id, joining)
            check_epoch(member, hb)
        else:
            member = group.static_member(hb.instance_id)
            if joining and member is not None and member.member_id != member_id:
                if member.epoch != STATIC_LEAVE_EPOCH:
                    raise HeartbeatError(
                        E.unreleased_instance_id,
                        f"Static member {member_id} with instance id {hb.instance_id} cannot "
                        f"join the group because the instance id is owned by "
                        f"{member.member_id} member.")
                replaced = member
                member = ConsumerMember(member_id, assigned=dict(replaced.assigned))
                replaced_target = group.target.get(replaced.member_id, {})
            elif joining and member is None:
                member = self._member(group, member_id, True)
            else:
                if member is None:
                    raise HeartbeatError(E.unknown_member_id,
                                         f"Instance id {hb.instance_id} is unknown.")
                if member.member_id != member_id:
                    raise HeartbeatError(
                        E.fenced_instance_id,
                        f"Static member {member_id} with instance id {hb.instance_id} was "
                        f"fenced by member {member.member_id}.")
                check_epoch(member, hb)
        before = (member.subscribed_names, member.subscribed_regex)
        new = member.member_id not in group.members
        self._update(member, hb)
        if replaced is not None:
            self._cancel(replaced)
            group.remove(replaced.member_id)
            group.target[member.member_id] = dict(replaced_target)
            log.info("Consumer group %s: static member %s (instance %s) replaces %s",
                     group.group_id, member.member_id, hb.instance_id, replaced.member_id)
        if new and replaced is None:
            log.info("Consumer group %s: member %s joins", group.group_id, member.member_id)
        resolve_regexes(group, member, self.topics(), hb.describable)
        old_assigned = member.assigned
        self.advance(group, member, new or before != (member.subscribed_names,
                                                      member.subscribed_regex),
                     hb.owned, replaced is not None)
        show = hb.owned is not None or joining or member.assigned != old_assigned
        return HeartbeatAnswer(member.member_id, member.epoch,
                               self.heartbeat_interval_ms(group.group_id),
                               dict(member.assigned) if show else None)

    def advance(self, group: ConsumerGroup, member: ConsumerMember, changed: bool,
                owned: Assignment | None, replacing: bool = False) -> None:
        """Add or update `member`, bump the group epoch when its subscription or the
        subscribed topics changed, recompute the target, move the member towards it, restart
        its session and write what changed (the steps of Kafka's consumerGroupHeartbeat, also
        taken for classic members' JoinGroup)."""
        group.add(member)
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            changed = True
        if changed and not replacing:
            group.epoch += 1
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        if reconcile(group, member, owned):
            self._on_reconciled(group, member)
        self._schedule_session(group, member)
        self.store.sync(group, None if replacing else member.member_id)

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, create: bool) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is not None:
            return member
        if not create:
            raise HeartbeatError(E.unknown_member_id,
                                 f"Member {member_id} is not a member of group "
                                 f"{group.group_id}.")
        return ConsumerMember(member_id)

    @staticmethod
    def _update(member: ConsumerMember, hb: Heartbeat) -> None:
        if hb.instance_id is not None:
            member.instance_id = hb.instance_id
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.server_assignor is not None:
            member.server_assignor = hb.server_assignor
        if hb.subscribed_names is not None:
            member.subscribed_names = tuple(sorted(set(hb.subscribed_names)))
        if hb.subscribed_regex is not None:
            member.subscribed_regex = hb.subscribed_regex or None
        member.client_id, member.client_host = hb.client_id, hb.client_host

    # --- subscriptions and the target assignment ------------------------------------------

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, int]:
        topics = self.topics()
        resolved = resolved_regexes(group)
        out: dict[str, int] = {}
        for m in group.members.values():
            for t in subscribed_topics(m.subscribed_names, m.subscribed_regex, topics,
                                       resolved):
                out[t] = topics[t][0]
        return out

    def _assignor(self, group: ConsumerGroup) -> str:
        chosen = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if chosen:
            return max(sorted(chosen), key=lambda name: chosen[name])
        return self.assignors[0]

    def _assign(self, group: ConsumerGroup) -> None:
        topics = self.topics()
        resolved = resolved_regexes(group)
        specs = {mid: MemberSpec(subscribed_topics(m.subscribed_names, m.subscribed_regex,
                                                   topics, resolved), group.target.get(mid, {}))
                 for mid, m in group.members.items()}
        name = self._assignor(group)
        group.target = ASSIGNORS[name](specs, group.subscription_metadata)
        group.assignor = name
        group.assignment_epoch = group.epoch
        log.info("Consumer group %s: target assignment for epoch %d by %s: %s", group.group_id,
                 group.epoch, name, {m: {t: sorted(ps) for t, ps in a.items()}
                                     for m, a in group.target.items()})

    def _on_reconciled(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        if member.state == MemberState.UNREVOKED_PARTITIONS and member.rebalance_timeout_ms > 0:
            member.rebalance_timer = self.clock.call_later(
                member.rebalance_timeout_ms, self._rebalance_expired, group, member.member_id,
                member.epoch)

    # --- leaving and fencing --------------------------------------------------------------

    def _leave(self, hb: Heartbeat) -> HeartbeatAnswer:
        group = self._group(hb.group_id, create=False)
        if hb.instance_id is None:
            member = self._member(group, hb.member_id, False)
        else:
            member = group.static_member(hb.instance_id)
            if member is None:
                raise HeartbeatError(E.unknown_member_id,
                                     f"Instance id {hb.instance_id} is unknown.")
            if member.member_id != hb.member_id:
                raise HeartbeatError(
                    E.fenced_instance_id,
                    f"Static member {hb.member_id} with instance id {hb.instance_id} was "
                    f"fenced by member {member.member_id}.")
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            # Kept with its assignment until its session expires, for its instance to return.
            log.info("Consumer group %s: static member %s left for now", group.group_id,
                     member.member_id)
            member.epoch, member.revoking = STATIC_LEAVE_EPOCH, {}
            self.store.sync(group, member.member_id)
        else:
            log.info("Consumer group %s: member %s leaves", group.group_id, member.member_id)
            self.fence(group, member.member_id)
        return HeartbeatAnswer(hb.member_id, hb.member_epoch, 0, None)

    def fence(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove a member: its partitions are free at once, the group epoch moves on and the
        others get the new target at their next heartbeat; or, when only classic members are
        left, turn the group classic (the downgrade, consumer_group_classic.py)."""
        if self.classic.can_downgrade(group, member_id):
            self.classic.downgrade(group, member_id)
            return
        member = group.remove(member_id)
        if member is None:
            return
        self._cancel(member)
        group.subscription_metadata = self._subscription_metadata(group)
        group.epoch += 1
        if group.members:
            self._assign(group)
        self.store.sync(group)

    @staticmethod
    def _cancel(member: ConsumerMember) -> None:
        for timer in (member.session_timer, member.rebalance_timer, member.sync_timer):
            if timer is not None:
                timer.cancel()
        member.session_timer = member.rebalance_timer = member.sync_timer = None

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout = (member.classic.session_timeout_ms if member.classic is not None
                   else self.session_timeout_ms(group.group_id))
        member.session_timer = self.clock.call_later(
            timeout, self._session_expired, group, member.member_id)

    def _setting(self, group_id: str, name: str, default: int) -> int:
        value = self.overrides(group_id).get(name)
        return default if value is None else int(value)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._setting(group_id, "consumer.session.timeout.ms", self.session_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, "consumer.heartbeat.interval.ms", self.heartbeat_ms)

    def _current(self, group: ConsumerGroup, member_id: str) -> ConsumerMember | None:
        if self.groups.get(group.group_id) is not group:
            return None
        return group.members.get(member_id)

    def _session_expired(self, group: ConsumerGroup, member_id: str) -> None:
        if self._current(group, member_id) is not None:
            log.info("Consumer group %s: member %s fenced, its session expired",
                     group.group_id, member_id)
            self.fence(group, member_id)

    def _rebalance_expired(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        member = self._current(group, member_id)
        if member is not None and member.epoch == epoch \
                and member.state == MemberState.UNREVOKED_PARTITIONS:
            log.info("Consumer group %s: member %s fenced, it did not revoke its partitions "
                     "within %d ms", group.group_id, member_id, member.rebalance_timeout_ms)
            self.fence(group, member_id)

    # --- what the other APIs ask ----------------------------------------------------------

    def delete(self, group_id: str) -> ErrorCode | None:
        """Drop an Empty consumer group (its offsets are the caller's); None if not ours."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return E.non_empty_group
        del self.groups[group_id]
        self.store.delete(group)
        return E.none

    def arm_restored(self) -> None:
        """Timers for members replayed from the offsets topic, as Kafka's onLoaded: their
        session starts now; one still to revoke gets its rebalance timeout again."""
        for group in self.groups.values():
            for member in group.members.values():
                if member.session_timer is None:
                    self._schedule_session(group, member)
                    self._on_reconciled(group, member)

    def close(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self._cancel(member)
