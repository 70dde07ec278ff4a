# Topic config changes across a ZooKeeper-coordinated cluster (issue 17), as Kafka's ZooKeeper
# mode does them. Writing (AdminZkClient.changeTopicConfig): the topic's complete override set
# goes to /config/topics/<t>, then a persistent-sequential /config/changes/config_change_<seq>
# ({"version":2,"entity_path":"topics/<t>"}) announces it. Following (Kafka's
# ZkNodeChangeNotificationListener + DynamicConfigManager): every broker watches
# /config/changes, and for each notification newer than the last it handled, reads the
# entity's config znode and applies it to its local log, through the same LogManager call
# the single-node AlterConfigs uses (set_topic_configs), so the partitions' live LogConfig
# changes at once. At its start a broker also reads the configs of every local topic (changes
# made while it was down may have expired). Notifications older than 15 minutes (on the
# broker's injected clock, against the znode's creation time) are deleted when notifications
# are processed, by any broker, as Kafka purges them.
from __future__ import annotations

import logging
from typing import Any, Mapping

from ..wire.errors import ErrorCode, KafkaError
from . import zkdata
from .follow import PathFollower
from .zk import NodeExists, NoNode, ZkClient

log = logging.getLogger("kafkalite.cluster")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs
TOPIC_ENTITY = "topics/"


def change_sequence(name: str) -> int:
    """config_change_0000000042 -> 42 (-1 for a child that is not a notification)."""
    if not name.startswith(zkdata.CONFIG_CHANGE_PREFIX):
        return -1
    digits = name[len(zkdata.CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isdigit() else -1


async def read_topic_config(zk: ZkClient, topic: str) -> dict[str, str]:
    """The topic's overrides in ZooKeeper ({} when it has no config znode)."""
    try:
        return zkdata.decode_topic_config((await zk.get(zkdata.topic_config_path(topic)))[0])
    except NoNode:
        return {}


async def check_topic_exists(zk: ZkClient, topic: str) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION unless /brokers/topics/<t> exists (Kafka's
    AdminZkClient.validateTopicConfig checks this before the configs)."""
    if await zk.exists(zkdata.topic_path(topic)) is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"Topic {topic} does not exist.")


async def change_topic_config(zk: ZkClient, topic: str, configs: Mapping[str, str]) -> None:
    """Write the topic's complete override set, then announce it."""
    path, data = zkdata.topic_config_path(topic), zkdata.encode_topic_config(configs)
    try:
        await zk.set(path, data)
    except NoNode:
        try:
            await zk.create(path, data, makepath=True)
        except NodeExists:  # created meanwhile by another writer: ours is the later write
            await zk.set(path, data)
    await zk.create(f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
                    zkdata.encode_config_change(TOPIC_ENTITY + topic), sequence=True,
                    makepath=True)


class ConfigChanges(PathFollower):
    """Applies every announced topic config change to this broker's local logs."""
    path = zkdata.CONFIG_CHANGES
    log = log

    def __init__(self, broker: Any, zk: ZkClient, clock: Any):
        super().__init__(zk)
        self.broker = broker
        self.clock = clock
        self.last_seq = -1  # the newest notification handled
        self._synced = False

    async def start(self) -> None:
        self.follow(first_refresh=True)

    async def refresh(self) -> None:
        names = await self.zk.children(zkdata.CONFIG_CHANGES, watch=True)
        changes = sorted((s, n) for n in names if (s := change_sequence(n)) >= 0)
        if not self._synced:
            await self._sync_local_topics()
            self._synced = True
        for seq, name in changes:
            if seq > self.last_seq:
                await self._process(name)
                self.last_seq = seq
        await self._purge(name for _, name in changes)

    async def _sync_local_topics(self) -> None:
        view = getattr(self.broker, "view", None)
        for name in list(self.broker.logs.topics):
            if view is None or view.topic(name) is not None:  # in the cluster, not ours only
                await self.apply_topic(name)

    async def _process(self, name: str) -> None:
        try:
            data, _ = await self.zk.get(f"{zkdata.CONFIG_CHANGES}/{name}")
        except NoNode:  # purged meanwhile: it was too old to matter
            return
        try:
            entity = zkdata.decode_config_change(data)
        except (ValueError, KeyError):
            log.warning("Ignoring config change notification %s: %r", name, data[:200])
            return
        if entity.startswith(TOPIC_ENTITY):
            await self.apply_topic(entity[len(TOPIC_ENTITY):])

    async def apply_topic(self, topic: str) -> None:
        """Bring the local log's overrides to what ZooKeeper holds (no local log: nothing)."""
        local = self.broker.logs.get(topic)
        if local is None:
            return
        configs = await read_topic_config(self.zk, topic)
        if configs == local.configs or self.broker.logs.get(topic) is not local:
            return
        try:
            await self.broker.logs.set_topic_configs(topic, configs)
        except (OSError, KafkaError) as e:  # a bad stored value or a failed write: keep ours
            log.error("Cannot apply the configs of %s from ZooKeeper: %s", topic, e)
            return
        log.info("Applied the configs of %s from ZooKeeper: %s", topic, configs)

    async def _purge(self, names: Any) -> None:
        expired_before = self.clock.wall_ms() - CHANGE_EXPIRATION_MS
        for name in names:
            path = f"{zkdata.CONFIG_CHANGES}/{name}"
            st = await self.zk.exists(path)
            if st is not None and st.ctime < expired_before:
                try:
                    await self.zk.delete(path)
                except NoNode:  # another broker purged it first
                    pass
