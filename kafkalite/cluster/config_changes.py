# Topic config changes across a ZooKeeper-coordinated cluster (issue 17), as Kafka's ZooKeeper
# mode does them. Writing (AdminZkClient.changeTopicConfig): the topic's complete override set
# goes to /config/topics/<t>, then a persistent-sequential /config/changes/config_change_<seq>
# ({"version":2,"entity_path":"topics/<t>"}) announces it. Following (Kafka's
# ZkNodeChangeNotificationListener + DynamicConfigManager): every broker watches
# /config/changes, and for each notification newer than the last it handled, reads the
# entity's config znode and applies it to its local log, through the same LogManager call
# the single-node AlterConfigs uses (set_topic_configs), so the partitions' live LogConfig
# changes at once. Dynamic broker configs the same way: /config/brokers/<default> (the
# cluster's defaults, applied by every broker) and /config/brokers/<id> (that broker's own),
# applied through broker/dynamic_configs.py as a local AlterConfigs on a BROKER resource is.
# At its start a broker also reads the configs of every local topic and its broker configs
# (changes made while it was down may have expired). Notifications older than 15 minutes (on the
# broker's injected clock, against the znode's creation time) are deleted when notifications
# are processed, by any broker, as Kafka purges them. SCRAM credentials and client quotas
# (users / clients / ips entities) are entity_configs.py's: read at start, then followed here.
from __future__ import annotations

import logging
from typing import Any, Awaitable, Mapping

from ..wire.errors import ErrorCode, KafkaError
from . import zkdata
from .entity_configs import CLIENTS, IPS, USERS, EntityConfigs
from .follow import PathFollower
from .notifications import CHANGE_EXPIRATION_MS, purge_expired, sequence_of  # noqa: F401
from .zk import NodeExists, NoNode, ZkClient, ZkError

log = logging.getLogger("kafkalite.cluster")

TOPICS, BROKERS = "topics", "brokers"  # the entity types followed


def change_sequence(name: str) -> int:
    """config_change_0000000042 -> 42 (-1 for a child that is not a notification)."""
    return sequence_of(name, zkdata.CONFIG_CHANGE_PREFIX)


async def read_entity_config(zk: ZkClient, entity_type: str, name: str) -> dict[str, str] | None:
    """/config/<type>/<name> (None when there is no such znode)."""
    try:
        return zkdata.decode_topic_config(
            (await zk.get(zkdata.entity_config_path(entity_type, name)))[0])
    except NoNode:
        return None


async def read_topic_config(zk: ZkClient, topic: str) -> dict[str, str]:
    """The topic's overrides in ZooKeeper ({} when it has no config znode)."""
    return await read_entity_config(zk, TOPICS, topic) or {}


async def check_topic_exists(zk: ZkClient, topic: str) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION unless /brokers/topics/<t> exists (Kafka's
    AdminZkClient.validateTopicConfig checks this before the configs)."""
    if await zk.exists(zkdata.topic_path(topic)) is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"Topic {topic} does not exist.")


async def change_entity_config(zk: ZkClient, entity_type: str, name: str,
                               configs: Mapping[str, str]) -> None:
    """Write the entity's complete config set, then announce it (AdminZkClient's
    changeEntityConfig)."""
    path = zkdata.entity_config_path(entity_type, name)
    data = zkdata.encode_topic_config(configs)
    try:
        await zk.set(path, data)
    except NoNode:
        try:
            await zk.create(path, data, makepath=True)
        except NodeExists:  # created meanwhile by another writer: ours is the later write
            await zk.set(path, data)
    await zk.create(f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
                    zkdata.encode_config_change(f"{entity_type}/{name}"), sequence=True,
                    makepath=True)


async def change_topic_config(zk: ZkClient, topic: str, configs: Mapping[str, str]) -> None:
    await change_entity_config(zk, TOPICS, topic, configs)


async def _answered(aw: Awaitable[Any]) -> Any:
    try:
        return await aw
    except ZkError as e:
        raise KafkaError(ErrorCode.unknown_server_error, f"ZooKeeper: {e!r}") from None


class ConfigChanges(PathFollower):
    """Applies every announced topic config change to this broker's local logs, and the
    dynamic broker configs of this broker and of the cluster's defaults to its config."""
    path = zkdata.CONFIG_CHANGES
    log = log

    def __init__(self, broker: Any, zk: ZkClient, clock: Any):
        super().__init__(zk)
        self.broker = broker
        self.clock = clock
        self.last_seq = -1  # the newest notification handled
        self._synced = False
        self.entities = EntityConfigs(broker, zk)  # credentials and quotas

    async def start(self) -> None:
        try:  # users and quotas in place before the listeners serve
            await self.entities.sync()
        except ZkError as e:  # read again by the first refresh
            log.warning("Reading users and quotas from ZooKeeper: %r", e)
        self.follow(first_refresh=True)

    # --- the alter APIs' ZooKeeper steps (a ZooKeeper failure: UNKNOWN_SERVER_ERROR) -------

    async def check_topic(self, topic: str) -> None:
        await _answered(check_topic_exists(self.zk, topic))

    async def topic_overrides(self, topic: str) -> dict[str, str]:
        return await _answered(read_topic_config(self.zk, topic))

    async def write_topic(self, topic: str, configs: Mapping[str, str]) -> None:
        """Write and announce; applied here at once too, so this broker's next answer
        shows it (the notification, back here, then finds nothing to do)."""
        await _answered(change_topic_config(self.zk, topic, configs))
        await self.apply_topic(topic)

    async def broker_configs(self, level: str) -> dict[str, str] | None:
        return await _answered(read_entity_config(self.zk, BROKERS, self._entity(level)))

    async def write_brokers(self, level: str, configs: Mapping[str, str]) -> None:
        """Write and announce a dynamic broker config level (the caller applies it)."""
        await _answered(change_entity_config(self.zk, BROKERS, self._entity(level), configs))

    async def write_scram(self, changes: Mapping[str, Any]) -> None:
        await _answered(self.entities.write_scram(changes))

    async def write_quotas(self, changed: Mapping[Any, Any]) -> None:
        await _answered(self.entities.write_quotas(changed))

    def _entity(self, level: str) -> str:
        from ..config import DEFAULT_LEVEL
        return zkdata.DEFAULT_ENTITY if level == DEFAULT_LEVEL else str(self.broker.node_id)

    # --- following /config/changes ---------------------------------------------------

    async def refresh(self) -> None:
        names = await self.zk.children(zkdata.CONFIG_CHANGES, watch=True)
        changes = sorted((s, n) for n in names if (s := change_sequence(n)) >= 0)
        if not self._synced:
            await self._sync_local_topics()
            await self.entities.sync()
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
        for entity in (zkdata.DEFAULT_ENTITY, str(self.broker.node_id)):
            await self.apply_brokers(entity)

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
        entity_type, _, entity_name = entity.partition("/")
        if entity_type == TOPICS:
            await self.apply_topic(entity_name)
        elif entity_type == BROKERS:
            await self.apply_brokers(entity_name)
        elif entity_type in (USERS, CLIENTS, IPS):
            await self.entities.apply(entity_type, entity_name)

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

    async def apply_brokers(self, entity: str) -> None:
        """The dynamic configs of the cluster's defaults ("<default>") or of this broker,
        as ZooKeeper holds them, through the same steps as a local AlterConfigs (validated,
        persisted, applied); another broker's own configs are its business."""
        from ..broker import dynamic_configs
        from ..config import BROKER_LEVEL, DEFAULT_LEVEL
        if entity == zkdata.DEFAULT_ENTITY:
            level = DEFAULT_LEVEL
        elif entity == str(self.broker.node_id):
            level = BROKER_LEVEL
        else:
            return
        configs = await read_entity_config(self.zk, BROKERS, entity)
        if configs is None or configs == self.broker.config.dynamic[level]:
            return
        try:
            dynamic_configs.alter(self.broker, level, configs, False)
        except KafkaError as e:
            log.error("Cannot apply the dynamic broker configs %s from ZooKeeper: %s",
                      entity, e.message)

    async def _purge(self, names: Any) -> None:
        await purge_expired(self.zk, zkdata.CONFIG_CHANGES, names, self.clock.wall_ms())
