# The join half of Kafka's classic GroupCoordinator rebalance protocol (GroupCoordinator.scala,
# 3.x): JoinGroup, the join phase and its timers, and what the join and sync halves share
# (member timers and removal). groups_membership.py builds SyncGroup, Heartbeat and
# LeaveGroup on it.
#
# JoinGroup answers are futures completed when the join phase ends; the handler awaits them,
# nothing polls. The join phase ends when every member has rejoined or at the rebalance
# timeout (members that did not rejoin are dropped, static ones kept until their session
# expires); an Empty group first waits group.initial.rebalance.delay.ms, extended while new
# members keep arriving, up to the rebalance timeout; after a join, members that send no
# SyncGroup within the rebalance timeout are dropped.
#
# As Kafka's heartbeat purgatory, each member has its own timer, restarted by every
# heartbeat, join answer, sync answer and commit, that fires at its session deadline (a new
# member's: NewMemberJoinTimeoutMs) and removes it, unless it is waiting in a rebalance
# (hasSatisfiedHeartbeat; the answer restarts the timer). Ids handed out with
# MEMBER_ID_REQUIRED are forgotten at their session timeout. Every timer is on the
# registry's injected clock (monotonic), none is a periodic sweep.
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable

from ..clock import TimerHandle
from ..wire.errors import ErrorCode
from .groups import (Group, GroupState, JoinResult, Member, SyncResult, answer_join,
                     answer_sync, validate_member)
from .groups_registry import GroupRegistry

log = logging.getLogger("kafkalite.coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's NewMemberJoinTimeoutMs
S = GroupState
E = ErrorCode


def done_future(value) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


def client_reason(reason: str | None) -> str:
    return f" (client reason: {reason})" if reason else ""


class JoinProtocol:
    def __init__(self, coord: GroupRegistry):
        self.coord = coord

    def _later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        return self.coord.clock.call_later(delay_ms, fn, *args)

    def _alive(self, group: Group) -> bool:
        return self.coord.is_current(group)

    # --- JoinGroup ------------------------------------------------------------------------

    def join(self, group_id: str, member_id: str, instance_id: str | None,
             require_known_id: bool, skip_supported: bool, client_id: str, client_host: str,
             rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], reason: str | None) -> asyncio.Future:
        c = self.coord
        err = c.check_status(group_id, allow_empty_id=False)
        if err is not None:
            return done_future(JoinResult(err, member_id))
        if not c.min_session_ms <= session_timeout_ms <= c.max_session_ms:
            return done_future(JoinResult(E.invalid_session_timeout, member_id))
        unknown = member_id == ""
        group = c.groups.get(group_id)
        if group is None:
            if not unknown:
                return done_future(JoinResult(E.unknown_member_id, member_id))
            group = c.add_group(group_id)
        fut = asyncio.get_running_loop().create_future()
        args = (instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, reason)
        if not self._accept(group, member_id):
            group.remove(member_id)
            fut.set_result(JoinResult(E.group_max_size_reached, ""))
        elif unknown:
            self._new_member_join(group, fut, require_known_id, skip_supported, *args)
        else:
            self._current_member_join(group, fut, member_id, *args)
        if group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)
        return fut

    def _accept(self, group: Group, member_id: str) -> bool:
        limit = self.coord.max_group_size
        if group.is_(S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join) or group.num_awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _new_member_join(self, group: Group, fut: asyncio.Future, require_known_id: bool,
                         skip_supported: bool, instance_id, client_id, client_host,
                         rebalance_ms, session_ms, protocol_type, protocols, reason) -> None:
        if group.is_(S.DEAD):
            fut.set_result(JoinResult(E.coordinator_not_available, ""))
            return
        if not group.supports(protocol_type, {p for p, _ in protocols}):
            fut.set_result(JoinResult(E.inconsistent_group_protocol, ""))
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                self._replace_static_member(group, fut, old_id, new_id, instance_id, protocols,
                                            rebalance_ms, session_ms, skip_supported, reason)
                return
        elif require_known_id:
            # KIP-394 (JoinGroup v4+): hand out the id first; the member joins with it.
            group.pending_members[new_id] = self._later(session_ms, self._pending_expired,
                                                        group, new_id)
            fut.set_result(JoinResult(E.member_id_required, new_id))
            return
        self._add_member_and_rebalance(group, fut, new_id, instance_id, client_id, client_host,
                                       rebalance_ms, session_ms, protocol_type, protocols, reason)

    def _current_member_join(self, group: Group, fut: asyncio.Future, member_id: str,
                             instance_id, client_id, client_host, rebalance_ms, session_ms,
                             protocol_type, protocols, reason) -> None:
        if group.is_(S.DEAD):
            fut.set_result(JoinResult(E.coordinator_not_available, member_id))
            return
        if not group.supports(protocol_type, {p for p, _ in protocols}):
            fut.set_result(JoinResult(E.inconsistent_group_protocol, member_id))
            return
        if member_id in group.pending_members:
            if instance_id is not None:  # pending ids are only handed to dynamic members
                fut.set_result(JoinResult(E.unknown_member_id, member_id))
                return
            self._add_member_and_rebalance(group, fut, member_id, None, client_id, client_host,
                                           rebalance_ms, session_ms, protocol_type, protocols,
                                           reason)
            return
        err = validate_member(group, member_id, instance_id)
        if err is not None:
            fut.set_result(JoinResult(err, member_id))
            return
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, fut, protocols, rebalance_ms,
                                              session_ms, reason)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member missed the join answer: give it the current generation again.
                fut.set_result(group.join_result(member, members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, fut, protocols, rebalance_ms,
                                                  session_ms, reason)
        elif group.is_(S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # A rejoining leader forces a rebalance (e.g. for topic metadata changes).
                self._update_member_and_rebalance(group, member, fut, protocols, rebalance_ms,
                                                  session_ms, reason)
            else:
                fut.set_result(group.join_result(member, members=False))
        else:
            fut.set_result(JoinResult(E.unknown_member_id, member_id))

    def _set_join_waiter(self, member: Member, fut: asyncio.Future) -> None:
        # Kafka drops a superseded JoinGroup unanswered; answering it lets that request end.
        answer_join(member, JoinResult(E.rebalance_in_progress, member.member_id))
        member.join_waiter = fut

    def _add_member_and_rebalance(self, group: Group, fut: asyncio.Future, member_id: str,
                                  instance_id, client_id, client_host, rebalance_ms, session_ms,
                                  protocol_type, protocols, reason) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                        session_ms, protocol_type, protocols, is_new=True)
        member.join_waiter = fut
        if group.is_(S.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat before its first join completes; bound its wait.
        self._expire_after(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance(group, f"adding member {member_id}{client_reason(reason)}")

    def _update_member_and_rebalance(self, group: Group, member: Member, fut: asyncio.Future,
                                     protocols, rebalance_ms: int, session_ms: int,
                                     reason) -> None:
        group.update_protocols(member, protocols, rebalance_ms, session_ms)
        self._set_join_waiter(member, fut)
        self.maybe_prepare_rebalance(
            group, f"member {member.member_id} rejoining{client_reason(reason)}")

    def _replace_static_member(self, group: Group, fut: asyncio.Future, old_id: str,
                               new_id: str, instance_id: str, protocols, rebalance_ms: int,
                               session_ms: int, skip_supported: bool, reason) -> None:
        """KIP-345: a restarted static member takes its old place (and assignment); the old
        member id is fenced."""
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.schedule_heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_protocols(member, protocols, rebalance_ms, session_ms)
        member.join_waiter = fut
        if group.is_(S.STABLE):
            if group.protocol_name != group.select_protocol():
                self.maybe_prepare_rebalance(group, f"static member {instance_id} changed "
                                                    "the group's protocol")
                return

            def stored(err: ErrorCode) -> None:  # Kafka's storeGroup callback
                if member.join_waiter is not fut:
                    return  # answered meanwhile (a rebalance, a fence): nothing to undo
                if err != E.none:
                    member.join_waiter = None
                    group.update_protocols(member, *old)
                    group.replace_static_member(instance_id, new_id, old_id)
                    self.schedule_heartbeat(group, member)
                    fut.set_result(JoinResult(err, "", group.generation, group.protocol_type,
                                              group.protocol_name, current_leader or ""))
                    return
                if skip_supported:  # JoinGroup v9: the leader learns it leads, skips assigning
                    leads = group.is_leader(new_id)
                    answer_join(member, group.join_result(member, members=leads, skip=leads))
                else:  # the old leader id: a restarted leader must not reassign a stable group
                    answer_join(member, group.join_result(member, members=False,
                                                          leader=current_leader or ""))
                log.info("Static member %s rejoined group %s without a rebalance",
                         instance_id, group.group_id)
            self.coord.persist_group(group, {m.member_id: m.assignment
                                             for m in group.members.values()}, stored)
        elif group.is_(S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"static member {instance_id} rejoined during sync")

    # --- the join phase -------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self.reset_and_propagate(group, E.rebalance_in_progress)
        self._cancel_sync_timer(group)
        group.pending_sync.clear()
        initial = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, self.coord.wall_ms())
        log.info("Preparing to rebalance group %s (generation %d): %s", group.group_id,
                 group.generation, reason)
        self._cancel_join_timer(group)
        if initial:
            delay = self.coord.initial_delay_ms
            group.initial_join = True
            group.initial_remaining_ms = max(group.rebalance_timeout_ms - delay, 0)
            group.join_timer = self._later(delay, self._initial_join_expired, group, delay)
        else:
            group.initial_join = False
            group.join_timer = self._later(group.rebalance_timeout_ms, self._join_expired, group)
            self.try_complete_join(group)

    def _initial_join_expired(self, group: Group, delay_ms: int) -> None:
        group.join_timer = None
        if not self._alive(group) or not group.is_(S.PREPARING_REBALANCE):
            return
        if group.new_member_added and group.initial_remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.coord.initial_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - delay_ms, 0)
            group.join_timer = self._later(delay, self._initial_join_expired, group, delay)
            return
        self.complete_join(group)

    def _join_expired(self, group: Group) -> None:
        group.join_timer = None
        if self._alive(group) and group.is_(S.PREPARING_REBALANCE):
            self.complete_join(group)

    def try_complete_join(self, group: Group) -> None:
        if group.is_(S.PREPARING_REBALANCE) and not group.initial_join and group.all_joined():
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        self._cancel_join_timer(group)
        group.initial_join = False
        for m in list(group.members.values()):
            if not m.awaiting_join and m.instance_id is None:
                group.remove(m.member_id)  # did not rejoin in time
        if group.is_(S.DEAD):
            return
        if not group.elect_joined_leader() and group.members:
            # Only static members that have not rejoined: wait for them or their expiry.
            group.join_timer = self._later(group.rebalance_timeout_ms, self._join_expired, group)
            return
        now = self.coord.wall_ms()
        group.generation += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition(S.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition(S.EMPTY, now)
        group.pending_sync.clear()
        if group.is_(S.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id,
                     group.generation)

            def stored(err: ErrorCode) -> None:
                if err != E.none:
                    log.warning("Could not write the empty metadata of group %s: %s",
                                group.group_id, err.name)
            self.coord.persist_group(group, {}, stored)
            return
        log.info("Stabilized group %s generation %d with %d members", group.group_id,
                 group.generation, len(group.members))
        for m in group.members.values():
            answer_join(m, group.join_result(m, members=group.is_leader(m.member_id)))
            self.schedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync.add(m.member_id)
        group.sync_timer = self._later(group.rebalance_timeout_ms, self._sync_expired, group,
                                       group.generation)

    # --- member timers, shared with the sync half ----------------------------------------

    def schedule_heartbeat(self, group: Group, member: Member) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration: the member's session starts
        again now."""
        self._expire_after(group, member, member.session_timeout_ms)

    def _expire_after(self, group: Group, member: Member, delay_ms: int) -> None:
        member.stop_timer()
        member.heartbeat_timer = self._later(delay_ms, self._heartbeat_expired, group, member)

    def _heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if not self._alive(group) or group.members.get(member.member_id) is not member:
            return
        if member.keeps_alive():
            return  # waiting in a rebalance; its answer restarts the timer
        self.remove_member(group, member, f"session timeout of member {member.member_id}")

    def _pending_expired(self, group: Group, member_id: str) -> None:
        if self._alive(group) and member_id in group.pending_members:
            group.forget_pending(member_id)
            self.try_complete_join(group)

    def remove_member(self, group: Group, member: Member, reason: str) -> None:
        answer_join(member, JoinResult(E.unknown_member_id, ""))
        answer_sync(member, SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        log.info("Group %s: removing member %s: %s", group.group_id, member.member_id, reason)
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def reset_and_propagate(self, group: Group, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate(group, error)

    def _propagate(self, group: Group, error: ErrorCode) -> None:
        ok = error == E.none
        for m in group.members.values():
            result = SyncResult(error, m.assignment, group.protocol_type if ok else None,
                                group.protocol_name if ok else None)
            if answer_sync(m, result):
                self.schedule_heartbeat(group, m)

    def _sync_expired(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if not self._alive(group) or generation != group.generation \
                or not group.is_(S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for mid in late:
            group.remove(mid)
        self.prepare_rebalance(group, f"members {late} sent no SyncGroup in time")

    def _cancel_join_timer(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    def _cancel_sync_timer(self, group: Group) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
