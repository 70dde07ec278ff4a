# The group coordinator: the consumer groups of this broker and their committed offsets.
# It lives in broker.groups; handlers call it, Broker.tick drives its periodic work.
#
# This broker coordinates every group. At start the groups and offsets stored in
# __consumer_offsets are replayed (offsets_log.py), a partition at a time, yielding to the
# event loop in between; until that is done group requests get COORDINATOR_LOAD_IN_PROGRESS
# (Heartbeat: NONE, SyncGroup: REBALANCE_IN_PROGRESS, as Kafka). Committed offsets survive a
# restart; membership does not: a reloaded group is Empty (with its generation and protocol
# type), and its former members' next request gets UNKNOWN_MEMBER_ID, so they rejoin.
# groups_membership.py has the rebalance protocol, offsets.py the offset operations.
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from ..wire.errors import ErrorCode
from .groups import CommittedOffset, Group, GroupState
from .groups_membership import Membership, StoreError
from .offsets import TP, OffsetManager, store_error
from .offsets_log import OffsetsLog, Record
from .offsets_records import (GroupValue, MemberValue, group_key, group_value, offset_key,
                              offset_value, parse_group_value, parse_key, parse_offset_value)

log = logging.getLogger("kafkalite.coordinator")

S = GroupState
E = ErrorCode


class GroupCoordinator:
    def __init__(self, config: Any, logs: Any, create_topic: Callable[..., Any],
                 on_append: Callable[[str, int], None] | None = None,
                 is_closing: Callable[[], bool] = lambda: False):
        self.min_session_ms = config["group.min.session.timeout.ms"]
        self.max_session_ms = config["group.max.session.timeout.ms"]
        self.max_group_size = config["group.max.size"]
        self.initial_delay_ms = config["group.initial.rebalance.delay.ms"]
        self.metadata_max_bytes = config["offset.metadata.max.bytes"]
        self.retention_ms = config["offsets.retention.minutes"] * 60_000
        self.retention_check_ms = config["offsets.retention.check.interval.ms"]
        self.store = OffsetsLog(logs, create_topic, config["offsets.topic.num.partitions"],
                                on_append)
        self.is_closing = is_closing
        self.groups: dict[str, Group] = {}
        self.membership = Membership(self)
        self.offsets = OffsetManager(self)
        self.loading = False
        self.closed = False
        self._load_task: asyncio.Task | None = None
        self._deleted_while_loading: list[str] = []
        self._next_expiry_ms = 0

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Replay __consumer_offsets: in the background when an event loop runs (requests
        meanwhile get COORDINATOR_LOAD_IN_PROGRESS), else at once."""
        if self.store.topic() is None:
            return
        self.loading = True
        loader = _Loader(self)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loader.run_sync()
            return
        self._load_task = loop.create_task(loader.run())

    def tick(self, now_ms: int) -> None:
        if self.loading or self.closed:
            return
        if self.is_closing():
            self._release_waiters()
            return
        for group in list(self.groups.values()):
            self.membership.sweep(group, now_ms)
        if now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + self.retention_check_ms
            self.offsets.expire(now_ms)
        self.compact(now_ms)

    def close(self) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        self._release_waiters()
        self.closed = True

    def _release_waiters(self) -> None:
        for group in self.groups.values():
            self.membership.shutdown(group)

    # --- shared helpers -------------------------------------------------------------------

    def check_status(self, group_id: str | None, allow_empty_id: bool) -> ErrorCode | None:
        """Kafka's validateGroupStatus. OffsetCommit/OffsetFetch/DescribeGroups/DeleteGroups
        accept the empty group id (for old clients); the membership APIs do not."""
        if group_id is None or (not group_id and not allow_empty_id):
            return E.invalid_group_id
        if self.closed:
            return E.coordinator_not_available
        if self.loading:
            return E.coordinator_load_in_progress
        return None

    def add_group(self, group_id: str) -> Group:
        group = Group(group_id, self.now_ms())
        self.groups[group_id] = group
        return group

    def remove_group(self, group: Group) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

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

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
        value = group_value(self.group_value(group, assignment))
        try:
            self.store.append(group.group_id, [(group_key(group.group_id), value)],
                              self.now_ms())
        except (OSError, ValueError) as e:
            raise store_error(e) from e

    # --- API entry points -----------------------------------------------------------------

    def find_coordinator(self) -> None:
        """Kafka creates the offsets topic on the first FindCoordinator for a group."""
        self.store.ensure_topic()

    def join_group(self, *args: Any, **kwargs: Any) -> asyncio.Future:
        return self.membership.join(*args, **kwargs)

    def sync_group(self, *args: Any, **kwargs: Any) -> asyncio.Future:
        return self.membership.sync(*args, **kwargs)

    def heartbeat(self, *args: Any, **kwargs: Any) -> ErrorCode:
        return self.membership.heartbeat(*args, **kwargs)

    def leave_group(self, *args: Any, **kwargs: Any) -> tuple[ErrorCode, list[ErrorCode]]:
        return self.membership.leave(*args, **kwargs)

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                       generation: int, offsets: dict[TP, CommittedOffset]
                       ) -> dict[TP, ErrorCode]:
        return self.offsets.commit(group_id, member_id, instance_id, generation, offsets)

    def fetch_offsets(self, group_id: str, partitions: list[TP] | None
                      ) -> tuple[ErrorCode, list[tuple[TP, CommittedOffset | None]]]:
        return self.offsets.fetch(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: list[TP]
                       ) -> tuple[ErrorCode, dict[TP, ErrorCode]]:
        return self.offsets.delete(group_id, partitions)

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        """(error, group); a group this broker does not know is described as Dead."""
        err = self.check_status(group_id, allow_empty_id=True)
        if err is not None:
            return err, None
        return E.none, self.groups.get(group_id)

    def list_groups(self, states: set[str], types: set[str]) -> tuple[ErrorCode, list[Group]]:
        """States match case-insensitively; every group here is of type "classic"."""
        if self.closed:
            return E.coordinator_not_available, []
        err = E.coordinator_load_in_progress if self.loading else E.none
        wanted = {s.lower() for s in states}
        if types and "classic" not in {t.lower() for t in types}:
            return err, []
        return err, [g for g in self.groups.values()
                     if not wanted or g.state.value.lower() in wanted]

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            err = self.check_status(gid, allow_empty_id=True)
            group = self.groups.get(gid) if err is None else None
            if err is not None:
                out[gid] = err
            elif group is None or group.is_(S.DEAD):
                out[gid] = E.group_id_not_found
            elif not group.is_(S.EMPTY):
                out[gid] = E.non_empty_group
            else:
                group.transition(S.DEAD, self.now_ms())
                removed, group.offsets = group.offsets, {}
                self.offsets.cleanup(group, removed)
                log.info("Deleted group %s (%d offsets)", gid, len(removed))
                out[gid] = E.none
        return out

    def on_topic_deleted(self, topic: str) -> None:
        if self.loading:
            self._deleted_while_loading.append(topic)
        else:
            self.offsets.remove_topic(topic)

    # --- compaction -----------------------------------------------------------------------

    def compact(self, now_ms: int) -> None:
        candidates = self.store.compaction_candidates()
        if not candidates:
            return
        by_partition: dict[int, list[Group]] = {p: [] for p in candidates}
        for g in self.groups.values():
            p = self.store.partition_for(g.group_id)
            if p in by_partition:
                by_partition[p].append(g)
        for p, groups in by_partition.items():
            live = sum(len(g.offsets) + 1 for g in groups)
            if not self.store.needs_compaction(p, live):
                continue
            records: list[Record] = []
            for g in groups:
                if g.generation > 0 or g.protocol_type is not None:
                    stable = {m.member_id: m.assignment for m in g.members.values()} \
                        if g.is_(S.STABLE) else None
                    records.append((group_key(g.group_id),
                                    group_value(self.group_value(g, stable))))
                records += [(offset_key(g.group_id, t, part), offset_value(o))
                            for (t, part), o in g.offsets.items()]
            try:
                self.store.compact(p, records, now_ms)
            except (OSError, ValueError) as e:
                log.warning("Compaction of partition %d of the offsets topic failed: %s", p, e)


class _Loader:
    """Replays __consumer_offsets into groups (latest record per key wins)."""

    def __init__(self, coord: GroupCoordinator):
        self.coord = coord
        self.offsets: dict[str, dict[TP, CommittedOffset]] = {}
        self.values: dict[str, GroupValue] = {}
        self.started = time.monotonic()

    def apply(self, key: bytes, value: bytes | None) -> None:
        try:
            kind, group_id, topic, partition = parse_key(key)
            if kind == "offset":
                offsets = self.offsets.setdefault(group_id, {})
                if value is None:
                    offsets.pop((topic, partition), None)  # type: ignore[arg-type]
                else:
                    offsets[(topic, partition)] = parse_offset_value(value)  # type: ignore[index]
            elif value is None:
                self.values.pop(group_id, None)
            else:
                self.values[group_id] = parse_group_value(value)
        except (ValueError, UnicodeDecodeError, IndexError) as e:
            log.warning("Skipping an unreadable record in the offsets topic: %s", e)

    async def run(self) -> None:
        try:
            for p in range(self.coord.store.num_partitions):
                for rec in self.coord.store.replay(p):
                    if rec is None:
                        await asyncio.sleep(0)
                    else:
                        self.apply(*rec)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Loading the offsets topic failed; serving what was read")
        self.finish()

    def run_sync(self) -> None:
        for p in range(self.coord.store.num_partitions):
            for rec in self.coord.store.replay(p):
                if rec is not None:
                    self.apply(*rec)
        self.finish()

    def finish(self) -> None:
        c = self.coord
        now = c.now_ms()
        n_offsets = 0
        for gid in set(self.values) | {g for g, o in self.offsets.items() if o}:
            group = c.add_group(gid)
            v = self.values.get(gid)
            if v is not None:
                group.generation = v.generation
                group.protocol_type = v.protocol_type or None
                # Former members are gone: the group became Empty now, unless it already was.
                group.state_ms = v.state_ms if not v.members and v.state_ms >= 0 else now
            group.offsets = self.offsets.get(gid, {})
            n_offsets += len(group.offsets)
        c.loading = False
        for topic in c._deleted_while_loading:
            c.offsets.remove_topic(topic)
        c._deleted_while_loading.clear()
        log.info("Loaded %d groups and %d committed offsets from the offsets topic in %.3fs",
                 len(c.groups), n_offsets, time.monotonic() - self.started)


__all__ = ["GroupCoordinator", "StoreError"]
