# The rest of Kafka's classic rebalance protocol (GroupCoordinator.scala, 3.x) on top of the
# join half in groups_join.py: SyncGroup, Heartbeat and LeaveGroup.
#
# SyncGroup answers wait (on futures) for the leader's assignment. Sessions expire on each
# member's own timer (groups_join.py); a SyncGroup or Heartbeat restarts it.
from __future__ import annotations

import asyncio
import logging

from ..wire.errors import ErrorCode
from .groups import (Group, GroupState, JoinResult, SyncResult, answer_join, answer_sync,
                     validate_member)
from .groups_join import JoinProtocol, client_reason, done_future

log = logging.getLogger("kafkalite.coordinator")

S = GroupState
E = ErrorCode

__all__ = ["Membership"]


class Membership(JoinProtocol):
    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> asyncio.Future:
        err = self.coord.check_status(group_id, allow_empty_id=False)
        if err == E.coordinator_load_in_progress:
            err = E.rebalance_in_progress  # the rebalance state was lost: rejoin
        if err is not None:
            return done_future(SyncResult(err))
        group = self.coord.groups.get(group_id)
        if group is None:
            return done_future(SyncResult(E.unknown_member_id))
        if group.is_(S.DEAD):
            return done_future(SyncResult(E.coordinator_not_available))
        err = validate_member(group, member_id, instance_id)
        if err is None and generation != group.generation:
            err = E.illegal_generation
        if err is None and ((protocol_type is not None and protocol_type != group.protocol_type)
                            or (protocol_name is not None
                                and protocol_name != group.protocol_name)):
            err = E.inconsistent_group_protocol
        if err is None and group.is_(S.EMPTY):
            err = E.unknown_member_id
        if err is None and group.is_(S.PREPARING_REBALANCE):
            err = E.rebalance_in_progress
        if err is not None:
            return done_future(SyncResult(err))
        member = group.members[member_id]
        if group.is_(S.STABLE):
            self._synced(group, member_id)
            self.schedule_heartbeat(group, member)
            return done_future(SyncResult(E.none, member.assignment, group.protocol_type,
                                    group.protocol_name))
        fut = asyncio.get_running_loop().create_future()
        answer_sync(member, SyncResult(E.rebalance_in_progress))  # a superseded SyncGroup
        member.sync_waiter = fut
        self._synced(group, member_id)
        if group.is_leader(member_id):
            missing = [m for m in group.members if m not in assignments]
            if missing:
                log.warning("Group %s generation %d: no assignment for %s; giving them none",
                            group_id, generation, missing)
            # Assignments naming members not in the group are ignored, as Kafka does.
            assignment = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation
            self.coord.persist_group(group, assignment, lambda err: self._stored(
                group, generation, member_id, assignment, err))
        return fut

    def _stored(self, group: Group, generation: int, leader_id: str,
                assignment: dict[str, bytes], err: ErrorCode) -> None:
        """The leader's assignment written (in a cluster: replicated) or not; a member that
        joined meanwhile started another rebalance, which the answer must not disturb."""
        if not self.coord.is_current(group) or not group.is_(S.COMPLETING_REBALANCE) \
                or group.generation != generation:
            return
        if err != E.none:
            log.warning("Group %s generation %d: the assignment was not stored: %s",
                        group.group_id, generation, err.name)
            self.reset_and_propagate(group, err)
            self.maybe_prepare_rebalance(group, "Error when storing group assignment during "
                                         f"SyncGroup (member: {leader_id})")
            return
        for mid, m in group.members.items():
            m.assignment = assignment.get(mid, b"")
        self._propagate(group, E.none)
        group.transition(S.STABLE, self.coord.wall_ms())

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel_sync_timer(group)

    # --- Heartbeat and LeaveGroup ---------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        err = self.coord.check_status(group_id, allow_empty_id=False)
        if err == E.coordinator_load_in_progress:
            return E.none  # Kafka answers blindly while loading
        if err is not None:
            return err
        group = self.coord.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        err = validate_member(group, member_id, instance_id)
        if err is not None:
            return err
        if generation != group.generation:
            return E.illegal_generation
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        self.schedule_heartbeat(group, group.members[member_id])
        return E.rebalance_in_progress if group.is_(S.PREPARING_REBALANCE) else E.none

    def leave(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        err = self.coord.check_status(group_id, allow_empty_id=False)
        if err is not None:
            return err, []
        group = self.coord.groups.get(group_id)
        if group is None:
            return E.none, [E.unknown_member_id] * len(leaving)
        if group.is_(S.DEAD):
            return E.coordinator_not_available, []
        results = []
        for member_id, instance_id, reason in leaving:
            if member_id == "":  # administrative removal by group.instance.id
                current = group.static_members.get(instance_id) if instance_id else None
                if current is None:
                    results.append(E.unknown_member_id)
                    continue
                member_id = current
            elif member_id in group.pending_members:
                group.remove(member_id)
                self.try_complete_join(group)
                results.append(E.none)
                continue
            else:
                err = validate_member(group, member_id, instance_id)
                if err is not None:
                    results.append(err)
                    continue
            self.remove_member(group, group.members[member_id],
                               f"member {member_id} left{client_reason(reason)}")
            results.append(E.none)
        return E.none, results

    # --- shutdown -------------------------------------------------------------------------

    def shutdown(self, group: Group) -> None:
        """Answer every waiting JoinGroup/SyncGroup and stop the group's timers: the
        coordinator is going away."""
        self._cancel_join_timer(group)
        self._cancel_sync_timer(group)
        for mid in list(group.pending_members):
            group.forget_pending(mid)
        for m in group.members.values():
            m.stop_timer()
            answer_join(m, JoinResult(E.not_coordinator, m.member_id))
            answer_sync(m, SyncResult(E.not_coordinator))
