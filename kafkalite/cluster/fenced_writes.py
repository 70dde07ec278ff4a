# The controller's writes to the partition state znodes (a base class of Controller): every
# write is fenced on the /controller_epoch version this controller set (multi_fenced) and
# conditional on the state znode's version, the partition epoch. A leader writes the ISR
# itself (design §4), so a cached state may be stale: BADVERSION reads it again and the
# decision is made again (bounded); a stale cache can never overwrite a newer state.
from __future__ import annotations

import logging
from typing import Callable, TypeVar

from . import zkdata
from .decisions import initial_state
from .zk import BadVersion, Create, Delete, NodeExists, NoNode, SetData, ZkClient

log = logging.getLogger("kafkalite.controller")
UPDATE_ATTEMPTS = 5  # conditional state writes that lost to a leader's ISR change: retries
PartitionKey = tuple[str, int]
T = TypeVar("T")


class FencedWrites:
    """State znode reads and fenced, conditional writes, over the controller's cache."""
    zk: ZkClient
    epoch: int
    epoch_zk_version: int
    topics: dict[str, zkdata.TopicAssignment]
    states: dict[PartitionKey, tuple[zkdata.PartitionState, int]]

    async def read_state(self, key: PartitionKey) -> None:
        try:
            data, st = await self.zk.get(zkdata.partition_state_path(*key))
        except NoNode:
            self.states.pop(key, None)
            return
        self.states[key] = (zkdata.PartitionState.decode(data), st.version)

    async def delete_fenced(self, path: str) -> None:
        try:
            await self.zk.multi_fenced([Delete(path)], self.epoch_zk_version)
        except NoNode:
            pass

    async def _initialize(self, key: PartitionKey, live: set[int]) -> None:
        topic, partition = key
        state = initial_state(self.topics[topic].partitions[partition], live, self.epoch)
        if state is None:  # no replica live: it stays new until one registers
            return
        path = zkdata.partition_state_path(topic, partition)
        parents = [path.rsplit("/", 2)[0], path.rsplit("/", 1)[0]]
        ops = [Create(p) for p in parents] + [Create(path, state.encode())]
        while ops:
            try:
                await self.zk.multi_fenced(ops, self.epoch_zk_version)
                self.states[key] = (state, 0)
                return
            except NodeExists as e:
                if e.index is None or e.index >= len(ops) - 1:
                    break  # the state exists already: adopt it
                ops = ops[e.index + 1:]  # that parent exists: create the rest
            except NoNode:  # the topic was deleted meanwhile
                return
        await self.read_state(key)

    async def update_state(self, key: PartitionKey,
                           transform: Callable[[zkdata.PartitionState],
                                               zkdata.PartitionState | None]) -> None:
        """Write transform(current state) conditionally on the state's version and fenced
        by the controller epoch; on BADVERSION read the state again and re-decide (bounded).
        transform returning None: nothing to write. Raises ControllerMoved when deposed."""
        path = zkdata.partition_state_path(*key)
        for _ in range(UPDATE_ATTEMPTS):
            if key not in self.states:
                return
            current, version = self.states[key]
            new = transform(current)
            if new is None:
                return
            try:
                (st,) = await self.zk.multi_fenced([SetData(path, new.encode(), version)],
                                                   self.epoch_zk_version)
                self.states[key] = (new, st.version)
                return
            except (BadVersion, NoNode):
                await self.read_state(key)
        log.warning("controller: %s-%d kept changing under %d attempts", *key, UPDATE_ATTEMPTS)

    async def read_admin_znode(self, path: str, decode: Callable[[bytes], T],
                               malformed: T) -> T | None:
        """An admin request znode decoded (None when absent; `malformed`, logged, when it
        cannot be read), its watch armed either way (on its creation when absent)."""
        try:
            data, _ = await self.zk.get(path, watch=True)
        except NoNode:
            await self.zk.exists(path, watch=True)
            return None
        try:
            return decode(data)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("controller: ignoring %s: %r", path, e)
            return malformed
