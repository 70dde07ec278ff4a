# The share-group side of the broker (KIP-932), sans sockets: membership (share_group.py),
# share-partition delivery state (share_partition.py) and share sessions
# (share_sessions.py), tied together so that a member that leaves, or whose session
# expires or closes, gives back the records it holds.
#
# A share-partition is created on the first share fetch that names it. Its start offset
# comes from the group's share.auto.offset.reset (a GROUP config, default "latest": the
# log end offset then; "earliest": the log start offset), as Kafka initialises it.
#
# Durability: share-partition state lives in __share_group_state as Kafka's ShareSnapshot /
# ShareUpdate records (share_store.py, share_state_log.py). The broker makes the coordinator
# at start and open() replays the topic as the other coordinators replay theirs: in the
# background once the event loop runs (`loading` meanwhile: the group-coordinator APIs answer
# COORDINATOR_LOAD_IN_PROGRESS, share fetches wait for `loaded`), at once otherwise. A
# share-partition that changed is written at the next persist(); the handlers await
# it before answering an acknowledgement, so an acknowledged record never comes back after
# a crash, and an unacknowledged one is at worst redelivered (locks are not persisted).
# Membership (groups, members, epochs, assignments) is the group coordinator's: kept in
# __consumer_offsets (share_group_records.py) and replayed with it; attach_offsets() hands
# the replayed groups over once that load is done (`loading` until then).
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ..clock import Clock
from ..wire.errors import ErrorCode as E
from .share_group import ShareGroups
from .share_group_records import ShareGroupLoader, ShareGroupStore
from .share_partition import SharePartition
from .share_sessions import ShareSessions
from .share_store import PKey, ShareStore
log = logging.getLogger("kafkalite.groups")


class ShareCoordinator:
    """`group_config(group_id, name)` reads a share.* GROUP config with the broker setting
    as its default; `offsets(topic, partition)` gives (log start, log end) or None."""

    def __init__(self, clock: Clock, config: Any,
                 group_config: Callable[[str, str], Any],
                 offsets: Callable[[str, int], tuple[int, int] | None],
                 partitions_of: Callable[[str], int | None], store: ShareStore | None = None):
        self.store = store
        self._state_loading = False
        self._members_loading = False
        self.member_store: ShareGroupStore | None = None
        self.loaded = asyncio.Event()
        self._load_task: asyncio.Task | None = None
        self.dirty: dict[PKey, SharePartition] = {}
        self._write_lock = asyncio.Lock()
        self.clock = clock
        self.config = config
        self.group_config = group_config
        self.offsets = offsets
        self.partitions: dict[PKey, SharePartition] = {}
        self.sessions = ShareSessions(max(1000, config["group.share.max.size"] * 5))
        self.groups = ShareGroups(clock, partitions_of, self._member_settings,
                                  config["group.share.max.size"], self.member_gone)

    def open(self) -> None:
        """Replay __share_group_state (nothing to do before its first use)."""
        if self.store is None or self.store.log.topic() is None:
            if not self.loading:
                self.loaded.set()
            return
        self._state_loading = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.store.load()
            self._finish_load()
            return
        self._load_task = loop.create_task(self._load_async())

    async def _load_async(self) -> None:
        assert self.store is not None
        try:
            for _ in self.store.replay():
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Loading __share_group_state failed; serving what was read")
        self._finish_load()

    @property
    def loading(self) -> bool:
        return self._state_loading or self._members_loading

    def _finish_load(self) -> None:
        self._state_loading = False
        if self.store is not None:  # topics deleted while the replay ran
            self.store.drop_stale()
        if not self.loading:
            self.loaded.set()
        log.info("Loaded %d share-partitions from __share_group_state (%d records)",
                 len(self.store.state) if self.store else 0,
                 self.store.replayed if self.store else 0)

    def attach_offsets(self, gc: Any) -> None:
        """Keep membership in the group coordinator `gc`'s __consumer_offsets: written on
        each change, restored from its replay (now if that is done, else when it is)."""
        self.member_store = ShareGroupStore(gc.store, self.clock.wall_ms)
        self.groups.on_change = self.member_store.sync
        gc.share_groups = lambda: self.groups.groups.values()  # live records for compaction
        if gc.loading:
            self._members_loading = True
            self.loaded.clear()
            gc.on_share_loaded = self.restore_members
        else:
            self.restore_members(gc.share_records)

    def restore_members(self, loader: ShareGroupLoader) -> None:
        n = loader.restore(self.groups.groups, self.member_store.store.logs
                           if self.member_store and self.member_store.store else None)
        self.groups.arm_restored()
        self._members_loading = False
        if not self.loading:
            self.loaded.set()
        log.info("Restored %d share groups (%d members) from the offsets topic",
                 len(self.groups.groups), n)

    def _member_settings(self, group_id: str) -> tuple[int, int]:
        return (int(self.group_config(group_id, "share.session.timeout.ms")),
                int(self.group_config(group_id, "share.heartbeat.interval.ms")))

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.record.lock.duration.ms"))

    def partition(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None:
            bounds = self.offsets(topic, partition)
            if bounds is None:
                return None
            reset = self.group_config(group_id, "share.auto.offset.reset")
            start = bounds[0] if reset == "earliest" else bounds[1]
            sp = self.partitions[key] = SharePartition(
                self.clock, start, lambda: self._limits(group_id),
                lambda changed: self.dirty.__setitem__(key, changed))
            saved = self.store.state.get(key) if self.store is not None else None
            if saved is not None:
                sp.restore(saved.start, saved.spans)
            else:
                self.dirty[key] = sp  # its start offset is state too (Kafka initialises it)
        return sp

    async def persist(self) -> None:
        """Write the share-partitions that changed and wait until that is durable; raises
        StorageError / OSError."""
        if self.store is None or not self.dirty:
            return
        async with self._write_lock:
            if not self.dirty:
                return  # an earlier caller wrote them (and waited) while this one queued
            changes = [(key, *sp.snapshot()) for key, sp in self.dirty.items()]
            self.dirty.clear()
            await self.store.persist(changes, self.clock.wall_ms())

    def _limits(self, group_id: str) -> tuple[int, int, int]:
        return (self.lock_duration_ms(group_id),
                self.config["group.share.partition.max.record.locks"],
                self.config["group.share.delivery.count.limit"])

    def member_gone(self, group_id: str, member_id: str) -> None:
        """The member left the group or its share session ended: release its records."""
        for (g, _t, _p), sp in self.partitions.items():
            if g == group_id:
                sp.release_member(member_id)

    def close_session(self, group_id: str, member_id: str) -> None:
        if self.sessions.close(group_id, member_id) is not None:
            self.member_gone(group_id, member_id)

    def topic_deleted(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[1] == topic]:
            del self.partitions[key]
        for key in [k for k in self.dirty if k[1] == topic]:
            del self.dirty[key]
        if self.store is not None:
            self.store.forget(lambda k: k[1] == topic)
        self.sessions.forget_topic(topic)

    # --- the group coordinator's view (ListGroups, DescribeGroups, DeleteGroups, JoinGroup,
    # ConsumerGroupHeartbeat refuse or list share groups through these) --------------------

    def has_group(self, group_id: str) -> bool:
        """Whether `group_id` is a share group (members, or share-partition state)."""
        return group_id in self.groups.groups or any(
            k[0] == group_id for k in self._state_keys())

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group: "Stable" with members, else "Empty"."""
        ids = set(self.groups.groups) | {k[0] for k in self._state_keys()}
        return [(g, self.groups.groups[g].state if g in self.groups.groups else "Empty")
                for g in sorted(ids)]

    def is_empty(self, group_id: str) -> bool:
        g = self.groups.groups.get(group_id)
        return g is None or not g.members

    async def delete_group(self, group_id: str) -> E:
        """DeleteGroups on a share group: NON_EMPTY_GROUP with members, GROUP_ID_NOT_FOUND
        when unknown, else the group and its share-partition state are gone."""
        if not self.has_group(group_id):
            return E.group_id_not_found
        if not self.is_empty(group_id):
            return E.non_empty_group
        group = self.groups.groups.pop(group_id, None)
        if group is not None and self.member_store is not None:
            self.member_store.delete(group)
        await self.delete_state(lambda k: k[0] == group_id)
        return E.none

    def _state_keys(self) -> set[PKey]:
        keys = set(self.partitions)
        if self.store is not None:
            keys |= set(self.store.state)
        return keys

    # --- share-group offsets (DescribeShareGroupOffsets, Alter…, Delete…) -----------------

    def start_offsets(self, group_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        """{(topic, partition): (start offset, records delivered-complete past it)}."""
        out = {}
        for key in self._state_keys():
            if key[0] != group_id:
                continue
            sp = self.partitions.get(key)
            if sp is not None:
                start, spans = sp.snapshot()
            else:
                saved = self.store.state[key]
                start, spans = saved.start, saved.spans
            done = sum(last - f + 1 for f, last, st, _c in spans if st in (2, 4))
            out[(key[1], key[2])] = (start, done)
        return out

    async def reset_start(self, group_id: str, topic: str, partition: int, topic_id: Any,
                          start: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts over at `start`."""
        key = (group_id, topic, partition)
        self.partitions.pop(key, None)
        self.dirty.pop(key, None)
        if self.store is not None:
            await self.store.initialize(key, topic_id, start, self.clock.wall_ms())
        else:
            self.partition(group_id, topic, partition)

    async def delete_state(self, drop: Callable[[PKey], bool]) -> None:
        keys = [k for k in self._state_keys() if drop(k)]
        for k in keys:
            self.partitions.pop(k, None)
            self.dirty.pop(k, None)
        if self.store is not None:
            await self.store.delete(keys, self.clock.wall_ms())

    def close(self) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        self.groups.close()
