# A broker's local logs following ZooKeeper's topics (issue 17): a topic whose assignment
# (/brokers/topics/<t>) places a replica here gets its local log, with the overrides in
# /config/topics/<t>, and grows with the assignment; a topic whose assignment disappears
# (the controller completed a deletion) loses its local log, as Kafka's StopReplica with
# deletePartitions does. Only topics seen in ZooKeeper are ever dropped: internal topics this
# broker created for itself stay.
#
# ensure_local_topic / drop_local_topic are the hooks: the cluster view (zk_view.py), which
# creates local logs for the partitions it sees assigned here, should call them (and take
# over this watch) when it lands.
# TODO(zk_view): only the partitions assigned here; the log's topic id from the assignment.
from __future__ import annotations

import asyncio
import logging
from typing import Any

from . import zkdata
from .zk import NoNode, SessionEvent, WatchEvent, ZkClient, ZkError

log = logging.getLogger("kafkalite.cluster")


async def ensure_local_topic(broker: Any, zk: ZkClient, name: str, partitions: int) -> None:
    """The local log of `name` with `partitions` partitions and its ZooKeeper config."""
    local = broker.logs.get(name)
    if local is None:
        try:
            configs = zkdata.decode_topic_config((await zk.get(
                zkdata.topic_config_path(name)))[0])
        except NoNode:
            configs = {}
        await broker.ensure_topic(name, partitions, configs)
        log.info("Created the local log of %s (%d partitions, configs %s)", name, partitions,
                 configs)
    elif len(local.partitions) < partitions:
        await broker.add_partitions(name, partitions)


async def drop_local_topic(broker: Any, name: str) -> None:
    """Delete the local log of `name` (its partition directories), if there is one."""
    topic = broker.logs.get(name)
    if topic is None:
        return
    await broker.delete_topic(name)
    broker.fetch_sessions.forget_topic(topic.name)
    broker.fetch_sessions.forget_topic(topic.topic_id)
    log.info("Deleted the local log of %s: the topic left ZooKeeper", name)


class LocalTopics:
    """Keeps the broker's local logs in step with /brokers/topics (watched)."""

    def __init__(self, broker: Any, zk: ZkClient, broker_id: int):
        self.broker = broker
        self.zk = zk
        self.broker_id = broker_id
        self.seen: set[str] = set()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        events = self.zk.subscribe()
        await self._refresh_logged()
        self._task = asyncio.create_task(self._pump(events))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _pump(self, events: asyncio.Queue) -> None:
        try:
            while True:
                event = await events.get()
                if (isinstance(event, SessionEvent) and event.state == "CONNECTED") or (
                        isinstance(event, WatchEvent) and event.path.startswith(zkdata.TOPICS)
                        and event.path.count("/") <= 3):
                    await self._refresh_logged()
        finally:
            self.zk.unsubscribe(events)

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except ZkError as e:  # the next CONNECTED reads again
            log.info("reading %s: %r", zkdata.TOPICS, e)
        except Exception:  # noqa: BLE001 - the watch must outlive one bad topic
            log.exception("following %s failed", zkdata.TOPICS)

    async def refresh(self) -> None:
        names = set(await self.zk.children(zkdata.TOPICS, watch=True))
        for gone in sorted(self.seen - names):
            await drop_local_topic(self.broker, gone)
        self.seen = names
        for name in sorted(names):
            try:
                data, _ = await self.zk.get(zkdata.topic_path(name), watch=True)
            except NoNode:  # deleted meanwhile: the children watch brings it
                continue
            assignment = zkdata.TopicAssignment.decode(data)
            if any(self.broker_id in r for r in assignment.partitions.values()):
                await ensure_local_topic(self.broker, self.zk, name,
                                         len(assignment.partitions))
