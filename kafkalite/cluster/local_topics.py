# A broker's local logs following ZooKeeper's topic deletions (issue 17): a topic whose
# assignment (/brokers/topics/<t>) disappears (the controller completed a deletion) loses
# its local log, as Kafka's StopReplica with deletePartitions does. The cluster view
# (zk_view.py) creates the local logs of the topics assigned here, with their ids; only
# topics seen in ZooKeeper are ever dropped, so internal topics a broker made itself stay.
#
# A partition that a reassignment took off this broker while the broker keeps others of the
# topic is emptied instead (empty_local_partition: its segments removed, as Kafka's
# StopReplica delete=true removes its log); the log manager keeps a topic's partitions
# dense, so an empty placeholder stays (DescribeLogDirs leaves it out).
#
# drop_local_topic is the hook: when the view forgets a topic it may call it and this watch
# (a second /brokers/topics children watch on the membership's session) can go.
from __future__ import annotations

import logging
from typing import Any

from ..log.errors import StorageError
from . import zkdata
from .follow import PathFollower
from .zk import ZkClient

log = logging.getLogger("kafkalite.cluster")


async def drop_local_topic(broker: Any, name: str) -> None:
    """Delete the local log of `name` (its partition directories), if there is one."""
    topic = broker.logs.get(name)
    if topic is None:
        return
    await broker.delete_topic(name)
    broker.fetch_sessions.forget_topic(topic.name)
    broker.fetch_sessions.forget_topic(topic.topic_id)
    log.info("Deleted the local log of %s: the topic left ZooKeeper", name)


def empty_local_partition(broker: Any, name: str, partition: int) -> None:
    """Remove the data of a partition whose replica left this broker: its segments, leader
    epochs and producer state go and the placeholder restarts empty at offset 0, so a
    replica assigned here again is refilled from the leader's log start."""
    p = broker.logs.partition(name, partition)
    if p is None:
        return
    try:  # runs p.on_truncate: the producer state reloaded (none left)
        p.truncate_fully_and_start_at(0)
    except StorageError as e:  # the view goes on; the directory's data stays until a restart
        log.error("Emptying the local log of %s-%d failed: %r", name, partition, e)
        return
    log.info("Emptied the local log of %s-%d: its replica left this broker", name, partition)


class LocalTopics(PathFollower):
    """Drops the local log of every topic that leaves /brokers/topics (watched)."""
    path = zkdata.TOPICS
    log = log

    def __init__(self, broker: Any, zk: ZkClient):
        super().__init__(zk)
        self.broker = broker
        self.seen: set[str] = set()

    async def start(self) -> None:
        # the first read in the task: a broker's start does no ZooKeeper I/O here
        self.follow(first_refresh=True)

    async def refresh(self) -> None:
        names = set(await self.zk.children(zkdata.TOPICS, watch=True))
        for gone in sorted(self.seen - names):
            await drop_local_topic(self.broker, gone)
        self.seen = names
