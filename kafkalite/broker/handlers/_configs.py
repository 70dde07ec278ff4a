# Config entries as Kafka reports them (for DescribeConfigs and CreateTopics v5+) and the
# steps AlterConfigs and IncrementalAlterConfigs share. Not an API handler (no @api); the
# leading underscore says so.
#
# DescribeConfigs follows Kafka's ConfigHelper (3.9/4.0): a topic config's synonyms are the
# topic override (TOPIC_CONFIG=1), then its broker synonyms set dynamically for this node
# (DYNAMIC_BROKER_CONFIG=2), then as cluster-wide dynamic defaults
# (DYNAMIC_DEFAULT_BROKER_CONFIG=3), then explicitly at startup (STATIC_BROKER_CONFIG=4), then
# the broker defaults (DEFAULT_CONFIG=5); its source is the first synonym's. Like Kafka,
# entries before the first one named as the primary broker synonym are dropped, so
# retention.ms (primary log.retention.ms, which has no default) lists no synonyms unless
# log.retention.ms itself is set. CreateTopics resolves sources the controller's way instead
# (KafkaConfigSchema.resolveEffectiveTopicConfig): the highest layer that sets any synonym.
# The BROKER resource "" (cluster defaults) describes only the dynamic defaults set.
# BROKER_LOGGER resources map onto Python's logging levels. GROUP resources (Kafka 4.0) list
# the six group configs (coordinator/group_configs.py).
from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from ...config import (BROKER_LEVEL, DEFAULT_LEVEL, PROPS, STATIC_LEVEL, TOPIC_DOCS,
                       TOPIC_PROP_MAP, TOPIC_PROPS, BrokerConfig, ConfigError, format_value)
from ...coordinator.group_configs import PROPS as GROUP_PROPS, GroupConfigs
from ...coordinator.group_configs import defaults as group_defaults
from ...log.errors import storage_error
from ...log.manager import validate_topic_name
from ...topic_config import check_topic_configs
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from .. import dynamic_configs
from ..build import ZERO, make, response_module
from ._storage import log_error_code

# ConfigResource.Type ids
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
RESOURCE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                  16: "CLIENT_METRICS", 32: "GROUP"}

# DescribeConfigsResponse.ConfigSource ids
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 4, 5, 6
GROUP_CONFIG = 8
# The source of each BrokerConfig layer.
LAYER_SOURCES = {BROKER_LEVEL: DYNAMIC_BROKER_CONFIG,
                 DEFAULT_LEVEL: DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_LEVEL: STATIC_BROKER_CONFIG}

# DescribeConfigsResponse.ConfigType ids, by kafkalite's (Kafka's) type names
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                "list": 7, "class": 8, "password": 9}

# DynamicBrokerConfig.brokerConfigSynonyms: broker properties that stand for one another,
# highest priority first.
_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))

Synonym = tuple[str, "str | None", int]


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: tuple[Synonym, ...]
    type_id: int
    doc: str | None


def broker_synonyms(name: str) -> list[str]:
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":  # log.flush.scheduler.interval.ms is its default
        return [name, "log.flush.scheduler.interval.ms"]
    return [name]


def _synonym_chain(cfg: BrokerConfig, name: str, sensitive: bool) -> list[Synonym]:
    names = broker_synonyms(name)
    out: list[Synonym] = []
    for level, values in cfg.layers():
        for n in names:
            if values.get(n) is not None:
                out.append((n, None if sensitive else format_value(values[n]),
                            LAYER_SOURCES[level]))
    for n in names:
        prop = PROPS.get(n)
        if prop is not None and prop.default is not None:
            out.append((n, None if sensitive else format_value(prop.default), DEFAULT_CONFIG))
    while out and out[0][0] != name:  # Kafka's dropWhile(s => s.name != name)
        out.pop(0)
    return out


def topic_value(logs, overrides: dict[str, str], name: str) -> Any:
    """A topic config's effective value given the topic's overrides."""
    try:
        return logs.effective(overrides, name)
    except ConfigError:  # an override stored before a stricter check: show it as stored
        return overrides[name]


def topic_entries(logs, overrides: dict[str, str]) -> list[Entry]:
    """Every topic config of a topic with these overrides, for DescribeConfigs."""
    cfg = logs.config
    out = []
    for prop in TOPIC_PROPS:
        value = format_value(topic_value(logs, overrides, prop.name))
        chain = _synonym_chain(cfg, prop.synonym, False) if prop.synonym in PROPS else []
        if prop.name in overrides:
            chain.insert(0, (prop.name, value, TOPIC_CONFIG))
        out.append(Entry(prop.name, value, chain[0][2] if chain else DEFAULT_CONFIG, False,
                         False, tuple(chain), CONFIG_TYPES.get(prop.type, 0),
                         TOPIC_DOCS.get(prop.name)))
    return out


def creation_source(cfg: BrokerConfig, overrides: dict[str, str], name: str) -> int:
    """A new topic's config source as CreateTopics v5+ reports it."""
    if name in overrides:
        return TOPIC_CONFIG
    synonym = TOPIC_PROP_MAP[name].synonym
    if synonym is not None:
        for level, values in cfg.layers():
            if any(values.get(n) is not None for n in broker_synonyms(synonym)):
                return LAYER_SOURCES[level]
    return DEFAULT_CONFIG


def _unknown_entry(name: str, sources: list[int], values: list[Any] | None = None) -> Entry:
    """A name Kafka does not know has no type, so it is described as sensitive; a listener
    override (`listener.name.<l>.[<mechanism>.]<config>`) takes its base config's type, as
    KafkaConfig.configType finds it through DynamicBrokerConfig.brokerConfigSynonyms."""
    base = _listener_override_base(name)
    if base is None or base.sensitive or values is None:
        return Entry(name, None, sources[0], True, True,
                     tuple((name, None, s) for s in sources), 0, None)
    shown = [format_value(v) if not isinstance(v, str) else v for v in values]
    return Entry(name, shown[0], sources[0], True, False,
                 tuple((name, v, s) for v, s in zip(shown, sources)),
                 CONFIG_TYPES.get(base.type, 0), None)


def _listener_override_base(name: str) -> Any:
    if not name.startswith("listener.name."):
        return None
    rest = name[len("listener.name."):]
    base = rest[rest.find(".") + 1:] if "." in rest else ""
    for candidate in (base, base[base.find(".") + 1:]):
        if candidate in PROPS:
            return PROPS[candidate]
    return None


def broker_entries(cfg: BrokerConfig) -> list[Entry]:
    """Every broker config, for DescribeConfigs on this node's BROKER resource."""
    out = []
    for prop, value, _default in cfg.items():
        chain = _synonym_chain(cfg, prop.name, prop.sensitive)
        out.append(Entry(prop.name, None if prop.sensitive else format_value(value),
                         chain[0][2] if chain else DEFAULT_CONFIG, prop.read_only,
                         prop.sensitive, tuple(chain), CONFIG_TYPES.get(prop.type, 0),
                         prop.doc or None))
    unknown: dict[str, list[tuple[int, Any]]] = {}
    for level, values in cfg.layers():  # Kafka lists unknown names too
        for name, raw in values.items():
            if name not in PROPS:
                unknown.setdefault(name, []).append((LAYER_SOURCES[level], raw))
    out += [_unknown_entry(name, [s for s, _ in found], [v for _, v in found])
            for name, found in unknown.items()]
    return out


def default_entries(cfg: BrokerConfig) -> list[Entry]:
    """The BROKER resource "": the cluster-wide dynamic defaults that are set, each with
    its synonyms at that level only."""
    values = cfg.dynamic[DEFAULT_LEVEL]
    out = []
    for name, raw in values.items():
        prop = PROPS.get(name)
        if prop is None:
            out.append(_unknown_entry(name, [DYNAMIC_DEFAULT_BROKER_CONFIG]))
            continue
        hide = prop.sensitive
        chain = [(n, None if hide else values[n], DYNAMIC_DEFAULT_BROKER_CONFIG)
                 for n in broker_synonyms(name) if values.get(n) is not None]
        while chain and chain[0][0] != name:
            chain.pop(0)
        out.append(Entry(name, None if hide else raw, DYNAMIC_DEFAULT_BROKER_CONFIG,
                         prop.read_only, hide, tuple(chain), CONFIG_TYPES.get(prop.type, 0),
                         prop.doc or None))
    return out


# --- BROKER_LOGGER: log4j level names over Python's logging ------------------------------

TRACE = 5
LOG_LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
              "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
ROOT_LOGGER = "root"


def level_name(level: int) -> str:
    for name, value in sorted(LOG_LEVELS.items(), key=lambda kv: -kv[1]):
        if level >= value:
            return name
    return "TRACE"


def loggers() -> dict[str, logging.Logger]:
    """The root logger and every logger created so far, by their log4j-style names."""
    out = {ROOT_LOGGER: logging.getLogger()}
    for name, obj in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(obj, logging.Logger):
            out[name] = obj
    return out


def logger_entries() -> list[Entry]:
    return [Entry(name, level_name(lg.getEffectiveLevel()), DYNAMIC_BROKER_LOGGER_CONFIG,
                  False, False, (), 0, None)
            for name, lg in loggers().items()]


# --- resource checks shared by the describe and alter APIs --------------------------------

def node_id_of(name: str, what: str = "Broker id") -> int:
    try:
        return int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request,
                         f"{what} must be an integer, but it is: {name}") from None


def check_topic_resource(name: str) -> None:
    """ControllerConfigurationValidator.validateTopicName."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    validate_topic_name(name)


def select(entries: Iterable[Entry], keys: Iterable[str] | None) -> list[Entry]:
    """configuration_keys: null or empty means every config."""
    wanted = set(keys or ())
    return [e for e in entries if not wanted or e.name in wanted]


# --- GROUP resources (Kafka 4.0's ConfigHelper.createGroupConfigEntry) ------------------

def group_store(broker) -> GroupConfigs:
    """The broker's group configs, loaded from its data directory on first use."""
    store = getattr(broker, "group_configs", None)
    if store is None:
        store = GroupConfigs(os.path.join(broker.logs.data_dir, ".kafkalite"))
        store.load()
        broker.group_configs = store
    return store


def group_entries(broker, name: str) -> list[Entry]:
    """Every group config with its value; a group's override is its only synonym
    (GROUP_CONFIG), the rest are DEFAULT_CONFIG without synonyms, as in Kafka 4.0 (no broker
    property shares a group config's name)."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    overrides = group_store(broker).get(name)
    base = group_defaults(broker.config)  # the broker's group.consumer.*/group.share.*
    out = []
    for p in GROUP_PROPS.values():
        value = overrides.get(p.name, str(base[p.name]))
        syns: tuple[Synonym, ...] = ((p.name, value, GROUP_CONFIG),) \
            if p.name in overrides else ()
        out.append(Entry(p.name, value, GROUP_CONFIG if syns else DEFAULT_CONFIG, False,
                         False, syns, CONFIG_TYPES[p.type], p.doc))
    return out


# --- the alter APIs' shared steps (ConfigAdminManager.preprocess, then the controller) ----

def check_alter_resource(r, duplicated: bool, null_names: list[str]) -> None:
    """Checks that come before the resource type is looked at."""
    if duplicated:
        raise KafkaError(ErrorCode.invalid_request, "Each resource must appear at most once.")
    names = [c.name for c in r.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    if null_names:
        raise KafkaError(ErrorCode.invalid_request,
                         "Null value not supported for : " + ", ".join(null_names))


def broker_level(broker, name: str) -> str:
    """The dynamic config level a BROKER resource name stands for: "" is the cluster-wide
    defaults, this node's id its own configs; another id is INVALID_REQUEST."""
    if not name:
        return DEFAULT_LEVEL
    if node_id_of(name, "Node id") != broker.node_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {broker.node_id}, but received {name}")
    return BROKER_LEVEL


async def apply_topic_configs(broker, name: str, configs: dict[str, str | None],
                              validate_only: bool) -> None:
    """Validate a topic's complete new override set, then store it unless validate_only.
    As Kafka's controller, a bad config is reported before a missing topic. A metadata
    write that fails is KAFKA_STORAGE_ERROR for this resource (the change is not kept).
    In a cluster, as Kafka's ZooKeeper mode (AdminZkClient.changeTopicConfig), the topic
    must exist in ZooKeeper (checked first), and the set is written there for every broker
    (cluster/config_changes.py)."""
    check_topic_resource(name)
    changes = cluster_configs(broker)
    if changes is not None:
        await changes.check_topic(name)
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_config,
                         "Null value not supported for topic configs: " + ",".join(nulls))
    checked = check_topic_configs(configs)
    if changes is None and broker.logs.get(name) is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"The topic '{name}' does not exist.")
    if validate_only:
        return
    if changes is not None:
        return await changes.write_topic(name, checked)
    try:
        await broker.logs.set_topic_configs(name, checked)
    except OSError as e:
        err = storage_error(e, f"Cannot write the metadata of topic {name}")
        raise KafkaError(log_error_code(err), str(err)) from None


def cluster_configs(broker) -> Any:
    """The broker's cluster.config_changes.ConfigChanges in ZooKeeper mode, else None."""
    return getattr(broker, "config_changes", None)


async def topic_overrides(broker, name: str) -> dict[str, str]:
    """A topic's current overrides: ZooKeeper's in a cluster, else the local log's."""
    changes = cluster_configs(broker)
    if changes is not None:
        return await changes.topic_overrides(name)
    topic = broker.logs.get(name)
    return dict(topic.configs) if topic is not None else {}


async def broker_dynamic(broker, level: str) -> dict[str, str]:
    """A dynamic config level's current set: ZooKeeper's in a cluster (other brokers change
    the defaults too), else this broker's."""
    changes = cluster_configs(broker)
    stored = await changes.broker_configs(level) if changes is not None else None
    return stored if stored is not None else dict(broker.config.dynamic[level])


async def alter_broker_configs(broker, level: str, new: dict[str, str],
                               validate_only: bool) -> None:
    """Make `new` the level's complete dynamic set (broker/dynamic_configs.py); in a
    cluster, once validated, it is first written to ZooKeeper for every broker."""
    changes = cluster_configs(broker)
    if changes is not None and not validate_only:
        dynamic_configs.validate(broker.config, level, new)
        await changes.write_brokers(level, new)
    dynamic_configs.alter(broker, level, new, validate_only)


async def alter_response(ctx, req, alter_one: Callable[..., Awaitable[None]]) -> Any:
    """Await alter_one(broker, resource, duplicated, validate_only) for every resource of an
    AlterConfigs or IncrementalAlterConfigs request, in order; its KafkaError is that
    resource's result. Returns the response entity, entries in request order."""
    v = ctx.api_version
    counts = Counter((r.resource_type, r.resource_name) for r in req.resources)
    mod = response_module(ctx.api_key, v)
    out = []
    for r in req.resources:
        err: KafkaError | None = None
        try:
            await alter_one(ctx.broker, r, counts[(r.resource_type, r.resource_name)] > 1,
                            req.validate_only)
        except KafkaError as e:
            err = e
        out.append(mod.AlterConfigsResourceResponse(
            error_code=err.code if err else ErrorCode.none,
            error_message=err.message if err else None,
            resource_type=r.resource_type, resource_name=r.resource_name))
    return make(response_class(ctx.api_key, v), throttle_time=ZERO, responses=tuple(out))
