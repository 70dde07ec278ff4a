# The share-group side of the broker (KIP-932), sans sockets: membership (share_group.py),
# share-partition delivery state (share_partition.py) and share sessions
# (share_sessions.py), tied together so that a member that leaves, or whose session
# expires or closes, gives back the records it holds.
#
# A share-partition is created on the first share fetch that names it. Its start offset
# comes from the group's share.auto.offset.reset (a GROUP config, default "latest": the
# log end offset then; "earliest": the log start offset), as Kafka initialises it.
#
# Durability: every share-partition's snapshot (start, end, in-flight spans with states
# and delivery counts; locks become AVAILABLE) goes to `share-state.json` in the state
# directory, rewritten atomically off the event loop; the handlers await the write
# before answering an acknowledgement, so an acknowledged record never comes back after a
# crash, and an unacknowledged one is at worst redelivered. (Kafka keeps the same state as
# ShareSnapshot/ShareUpdate records in __share_group_state; a file stands in for it here.)
from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any, Callable

from ..fileio import atomic_write

from ..clock import Clock
from .share_group import ShareGroups
from .share_partition import SharePartition
from .share_sessions import ShareSessions

PKey = tuple[str, str, int]  # (group, topic, partition)
STATE_FILE = "share-state.json"
log = logging.getLogger("kafkalite.groups")


class ShareCoordinator:
    """`group_config(group_id, name)` reads a share.* GROUP config with the broker setting
    as its default; `offsets(topic, partition)` gives (log start, log end) or None."""

    def __init__(self, clock: Clock, config: Any,
                 group_config: Callable[[str, str], Any],
                 offsets: Callable[[str, int], tuple[int, int] | None],
                 partitions_of: Callable[[str], int | None], state_dir: str | None = None):
        self.path = os.path.join(state_dir, STATE_FILE) if state_dir else None
        self.saved: dict[str, dict] = self._load()
        self.dirty = False
        self._write_lock = asyncio.Lock()
        self.clock = clock
        self.config = config
        self.group_config = group_config
        self.offsets = offsets
        self.partitions: dict[PKey, SharePartition] = {}
        self.sessions = ShareSessions(max(1000, config["group.share.max.size"] * 5))
        self.groups = ShareGroups(clock, partitions_of, self._member_settings,
                                  config["group.share.max.size"], self.member_gone)

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
                self.clock, start, lambda: self._limits(group_id), self._mark)
            snap = self.saved.get(self._name(key))
            if snap is not None:
                sp.restore(snap)
        return sp

    @staticmethod
    def _name(key: PKey) -> str:
        return json.dumps(list(key))

    def _mark(self, _sp: SharePartition) -> None:
        self.dirty = True

    def _load(self) -> dict[str, dict]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.error("Ignoring the share-group state in %s: %s", self.path, e)
            return {}

    async def persist(self) -> None:
        """Write every share-partition's snapshot if anything changed; raises OSError."""
        if self.path is None or not self.dirty:
            return
        async with self._write_lock:
            if not self.dirty:
                return
            self.dirty = False
            state = dict(self.saved)
            state.update({self._name(k): sp.snapshot() for k, sp in self.partitions.items()})
            data = json.dumps(state, separators=(",", ":")).encode()
            path = self.path
            os.makedirs(os.path.dirname(path), exist_ok=True)
            await asyncio.get_running_loop().run_in_executor(None, atomic_write, path, data)
            self.saved = state

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
        for name in [n for n in self.saved if json.loads(n)[1] == topic]:
            del self.saved[name]
        self.dirty = True
        self.sessions.forget_topic(topic)

    def close(self) -> None:
        self.groups.close()
