# The group coordinator: the consumer groups of this broker and their committed offsets.
# It lives in broker.groups; handlers call it, Broker.tick drives its periodic work.
#
# This broker coordinates every group. At start the groups and offsets stored in
# __consumer_offsets are replayed (offsets_log.py), a partition at a time, yielding to the
# event loop in between; until that is done group requests get COORDINATOR_LOAD_IN_PROGRESS
# (Heartbeat: NONE, SyncGroup: REBALANCE_IN_PROGRESS, as Kafka). Committed offsets survive a
# restart; membership does not: a reloaded group is Empty (with its generation and protocol
# type), and its former members' next request gets UNKNOWN_MEMBER_ID, so they rejoin.
# groups_membership.py has the rebalance protocol, offsets.py the offset operations, and
# groups_registry.py what they share (the groups, the settings, the clock); none of them
# imports this module. KIP-932 share groups' records (key versions 9-14) are collected by the
# replay and handed to the share coordinator (ShareCoordinator.attach_offsets) at its end.
#
# Time is the injected clock's: member, join and sync timers run on its monotonic reading
# (each at its own deadline), so a step of the wall clock expires nobody. tick() only runs
# what Kafka runs periodically: the offsets expiry check, every
# offsets.retention.check.interval.ms of monotonic time. Compaction of __consumer_offsets
# is the log cleaner's, as for any compacted topic.
#
# Transactional offsets (offsets_txn.py) settle when the broker's marker writer calls
# on_txn_marker for a partition of __consumer_offsets; markers met while loading are applied
# once the load is done (a marker already replayed finds nothing left to settle).
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ..clock import Clock, SystemClock
from ..wire.errors import ErrorCode
from .consumer_group_coordinator import ConsumerGroupCoordinator
from .consumer_group_records import KINDS as CONSUMER_KEYS
from .consumer_group_store import ConsumerGroupLoader
from .groups import CommittedOffset, Group, GroupState, SyncResult
from .groups_join import done_future
from .groups_membership import Membership
from .groups_leadership import GroupLeadership
from .offsets import TP, OffsetManager
from .offsets_log import TOPIC, OffsetsLog, Replayed
from .offsets_records import GroupValue, parse_group_value, parse_key, parse_offset_value
from .offsets_txn import TxnOffsets, merge_committed
from .share_group_records import KINDS as SHARE_KEYS, ShareGroupLoader

log = logging.getLogger("kafkalite.coordinator")

S = GroupState
E = ErrorCode


class GroupCoordinator(GroupLeadership):
    def __init__(self, config: Any, logs: Any, create_topic: Callable[..., Any],
                 on_append: Callable[[str, int], None] | None = None,
                 is_closing: Callable[[], bool] = lambda: False,
                 clock: Clock | None = None):
        store = OffsetsLog(logs, create_topic, config["offsets.topic.num.partitions"],
                           on_append, topic_configs={
                               "cleanup.policy": "compact",
                               "segment.bytes": str(config["offsets.topic.segment.bytes"])})
        super().__init__(config, store, clock if clock is not None else SystemClock())
        self.is_closing = is_closing
        self.membership = Membership(self)
        self.offsets = OffsetManager(self, self.membership.schedule_heartbeat)
        self.txn = TxnOffsets(self)
        self._markers_while_loading: list[tuple[int, int, bool]] = []
        self._load_task: asyncio.Task | None = None
        self._deleted_while_loading: list[str] = []
        self._next_expiry_check: int | None = None  # monotonic ms
        # KIP-848 groups: made now, so the load arms the replayed members' session timers.
        self.consumer_coordinator = ConsumerGroupCoordinator(
            self, config,
            lambda: {n: (len(t.partitions), t.internal) for n, t in logs.topics.items()})
        # KIP-932 groups' records, replayed here for the share coordinator
        # (ShareCoordinator.attach_offsets sets the two hooks).
        self.share_records = ShareGroupLoader()
        self.on_share_loaded: Callable[[ShareGroupLoader], None] | None = None
        self.share_groups: Callable[[], Any] = lambda: ()

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Replay __consumer_offsets: in the background when an event loop runs (requests
        meanwhile get COORDINATOR_LOAD_IN_PROGRESS), else at once."""
        if self.store.topic() is None or self.leadership is not None:
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
        """Periodic work; `now_ms` is the wall time that offsets' expiry compares with commit
        and group-state timestamps. The check's interval is measured on the monotonic clock."""
        if self.loading or self.closed:
            return
        if self.is_closing():
            self._release_waiters()
            return
        mono = self.clock.monotonic_ms()
        if self._next_expiry_check is None or mono >= self._next_expiry_check:
            self._next_expiry_check = mono + self.retention_check_ms
            self.offsets.expire(now_ms)

    def close(self) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        if self.leadership is not None:
            self.leadership.close()
        self._release_waiters()
        self.consumer_coordinator.close()
        self.closed = True

    def _release_waiters(self) -> None:
        for group in self.groups.values():
            self.membership.shutdown(group)

    async def load_partitions(self, partitions: list[int]) -> None:
        await _Loader(self, partitions).run()

    # --- API entry points -----------------------------------------------------------------

    def find_coordinator(self) -> None:
        """Kafka creates the offsets topic on the first FindCoordinator for a group."""
        self.store.ensure_topic()

    # The classic requests of a group id held by a KIP-848 group go to its classic members
    # (consumer_group_classic.py); an empty one gives the id back to a classic JoinGroup. A
    # share group's id: SyncGroup/Heartbeat/LeaveGroup (whole request) UNKNOWN_MEMBER_ID.
    def _share_group(self, group_id: str) -> bool:
        return self.check_status(group_id, False) is None and self.group_type(group_id) == "share"

    def _consumer_group(self, group_id: str, joining: bool = False) -> Any:
        if self.check_status(group_id, allow_empty_id=False) is not None:
            return None
        if joining and self.release_consumer_group(group_id):
            return None
        return self.consumer_groups.get(group_id)

    def join_group(self, group_id: str, member_id: str, instance_id: str | None,
                   require_known_id: bool, skip_supported: bool, client_id: str,
                   client_host: str, rebalance_ms: int, session_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None) -> asyncio.Future:
        group = self._consumer_group(group_id, joining=True)
        if group is None or not self.min_session_ms <= session_ms <= self.max_session_ms:
            return self.membership.join(group_id, member_id, instance_id, require_known_id,
                                        skip_supported, client_id, client_host, rebalance_ms,
                                        session_ms, protocol_type, protocols, reason)
        return done_future(self.consumer_coordinator.classic.join(
            group, member_id, instance_id, require_known_id, client_id, client_host,
            rebalance_ms, session_ms, protocol_type, protocols))

    def sync_group(self, group_id: str, generation: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes]) -> asyncio.Future:
        if self._share_group(group_id):
            return done_future(SyncResult(E.unknown_member_id))
        group = self._consumer_group(group_id)
        if group is None:
            return self.membership.sync(group_id, generation, member_id, instance_id,
                                        protocol_type, protocol_name, assignments)
        return done_future(self.consumer_coordinator.classic.sync(
            group, member_id, instance_id, generation, protocol_type, protocol_name))

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        if self._share_group(group_id):
            return E.unknown_member_id
        group = self._consumer_group(group_id)
        if group is None:
            return self.membership.heartbeat(group_id, member_id, instance_id, generation)
        return self.consumer_coordinator.classic.heartbeat(group, member_id, instance_id,
                                                           generation)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        if self._share_group(group_id):
            return E.unknown_member_id, []
        group = self._consumer_group(group_id)
        if group is None:
            return self.membership.leave(group_id, leaving)
        return E.none, [self.consumer_coordinator.classic.leave(group, mid, iid)
                        for mid, iid, _ in leaving]

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                       generation: int, offsets: dict[TP, CommittedOffset]
                       ) -> dict[TP, ErrorCode]:
        return self.offsets.commit(group_id, member_id, instance_id, generation, offsets)

    def fetch_offsets(self, group_id: str, partitions: list[TP] | None
                      ) -> tuple[ErrorCode, list[tuple[TP, CommittedOffset | None]]]:
        return self.offsets.fetch(group_id, partitions)

    def unstable_offsets(self, group_id: str, partitions: list[TP]) -> set[TP]:
        """Which of `partitions` have offsets pending in an open transaction (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return self.txn.unstable(self.groups.get(group_id), partitions)

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int,
                          producer_epoch: int, member_id: str, generation: int,
                          group_instance_id: str | None, offsets: dict[TP, CommittedOffset]
                          ) -> dict[TP, ErrorCode]:
        return self.txn.commit(transactional_id, group_id, producer_id, producer_epoch,
                               member_id, generation, group_instance_id, offsets)

    def on_txn_marker(self, topic: str, partition: int, producer_id: int,
                      commit: bool) -> None:
        """A listener of broker.txn_marker_listeners: a COMMIT/ABORT marker was written."""
        if topic != TOPIC:
            return
        if self.loading or partition in self.loading_partitions:
            self._markers_while_loading.append((partition, producer_id, commit))
        else:
            self.txn.complete(partition, producer_id, commit)

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
        err = E.coordinator_load_in_progress if self.loading or self.loading_partitions \
            else E.none
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
                group.transition(S.DEAD, self.wall_ms())
                removed, group.offsets = group.offsets, {}
                self.offsets.cleanup(group, removed)
                log.info("Deleted group %s (%d offsets)", gid, len(removed))
                out[gid] = E.none
        return out

    def on_topic_deleted(self, topic: str) -> None:
        if self.loading or self.loading_partitions:
            self._deleted_while_loading.append(topic)
        else:
            self.offsets.remove_topic(topic)


class _Loader:
    """Replays __consumer_offsets into groups (latest record per key wins). Records of a
    transactional batch stay pending, per producer, until that producer's next marker in the
    same partition: COMMIT merges them as the live coordinator does, ABORT drops them; those
    without a marker yet are restored as pending."""

    def __init__(self, coord: GroupCoordinator, partitions: list[int] | None = None):
        self.coord = coord
        self.partitions = partitions  # None: all of them
        self.offsets: dict[str, dict[TP, CommittedOffset]] = {}
        self.values: dict[str, GroupValue] = {}
        # producer id -> group -> pending offsets, for the partition being replayed
        self.pending: dict[int, dict[str, dict[TP, CommittedOffset]]] = {}
        self.open: dict[str, dict[int, dict[TP, CommittedOffset]]] = {}  # after replay
        self.started = coord.clock.monotonic_ms()
        self.consumer = ConsumerGroupLoader()  # KIP-848 groups' records

    def apply(self, rec: Replayed) -> None:
        if rec.marker is not None:
            self.settle(rec.producer_id, rec.marker)
            return
        try:
            kind = int.from_bytes(rec.key[:2], "big") if rec.key is not None else -1
            if kind in CONSUMER_KEYS or kind in SHARE_KEYS:
                loader = self.consumer if kind in CONSUMER_KEYS else self.coord.share_records
                loader.apply(rec.key, rec.value)  # type: ignore[arg-type]
                return
            kind, group_id, topic, partition = parse_key(rec.key)  # type: ignore[arg-type]
            if kind == "offset":
                tp = (topic, partition)
                if rec.producer_id >= 0:
                    offsets = self.pending.setdefault(rec.producer_id, {}) \
                        .setdefault(group_id, {})
                else:
                    offsets = self.offsets.setdefault(group_id, {})
                if rec.value is None:
                    offsets.pop(tp, None)  # type: ignore[arg-type]
                else:
                    o = parse_offset_value(rec.value)
                    o.log_offset = rec.offset
                    offsets[tp] = o  # type: ignore[index]
            elif rec.value is None:
                self.values.pop(group_id, None)
            else:
                self.values[group_id] = parse_group_value(rec.value)
        except (ValueError, UnicodeDecodeError, IndexError) as e:
            log.warning("Skipping an unreadable record in the offsets topic: %s", e)

    def settle(self, producer_id: int, commit: bool) -> None:
        for gid, pending in self.pending.pop(producer_id, {}).items():
            if commit:
                merge_committed(self.offsets.setdefault(gid, {}), pending)

    def end_partition(self) -> None:
        for pid, groups in self.pending.items():
            for gid, pending in groups.items():
                self.open.setdefault(gid, {})[pid] = pending
        self.pending = {}

    async def run(self) -> None:
        try:
            for p in self._partitions():
                for rec in self.coord.store.replay(p):
                    if rec is None:
                        await asyncio.sleep(0)
                    else:
                        self.apply(rec)
                self.end_partition()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Loading the offsets topic failed; serving what was read")
        self.finish()

    def _partitions(self) -> list[int]:
        if self.partitions is not None:
            return self.partitions
        return list(range(self.coord.store.num_partitions))

    def run_sync(self) -> None:
        for p in self._partitions():
            for rec in self.coord.store.replay(p):
                if rec is not None:
                    self.apply(rec)
            self.end_partition()
        self.finish()

    def finish(self) -> None:
        c = self.coord
        now = c.wall_ms()
        n_offsets = 0
        gids = set(self.values) | {g for g, o in self.offsets.items() if o} \
            | {g for g, o in self.open.items() if any(o.values())}
        for gid in gids:
            group = c.add_group(gid)
            v = self.values.get(gid)
            if v is not None:
                group.generation = v.generation
                group.protocol_type = v.protocol_type or None
                # Former members are gone: the group became Empty now, unless it already was.
                group.state_ms = v.state_ms if not v.members and v.state_ms >= 0 else now
            group.offsets = self.offsets.get(gid, {})
            c.txn.restore(group, self.open.get(gid, {}))
            n_offsets += len(group.offsets)
        n_members = self.consumer.restore(c.consumer_groups, c.store.logs)
        c.consumer_coordinator.arm_restored()
        c.loading = False
        for p in self.partitions or ():  # served from here on (markers below included)
            c.loading_partitions.discard(p)
        if c.on_share_loaded is not None:
            c.on_share_loaded(c.share_records)
        for topic in c._deleted_while_loading:
            c.offsets.remove_topic(topic)
        if not c.loading_partitions:
            c._deleted_while_loading.clear()
        for partition, pid, commit in c._markers_while_loading:
            if partition not in c.loading_partitions:
                c.txn.complete(partition, pid, commit)
        c._markers_while_loading = [m for m in c._markers_while_loading
                                    if m[0] in c.loading_partitions]
        log.info("Loaded %d groups, %d consumer groups (%d members) and %d committed offsets "
                 "from the offsets topic in %.3fs", len(c.groups), len(c.consumer_groups),
                 n_members, n_offsets, (c.clock.monotonic_ms() - self.started) / 1000)


__all__ = ["GroupCoordinator"]
