# Dynamic broker configs, as Kafka's DynamicBrokerConfig: AlterConfigs and
# IncrementalAlterConfigs on a BROKER resource set this node's configs (resource name
# "<node.id>") or the cluster-wide defaults (resource name ""), above the static ones.
#
# Refused as Kafka refuses them, with INVALID_REQUEST and Kafka's messages: a config Kafka does
# not update at run time ("Cannot update these configs dynamically: Set(num.partitions)",
# read_only in DescribeConfigs), an invalid value, a per-broker config (listeners) at the
# default level, a thread count beyond half or double the current one. Names kafkalite does
# not know are accepted and kept, as Kafka keeps them. kafkalite's own refusal: listeners and
# advertised.listeners, which Kafka re-binds at run time and kafkalite binds only at start.
#
# An accepted change is persisted (.kafkalite/dynamic-broker-configs.json, written atomically;
# Kafka keeps them in its metadata log), then applied at once: topics inherit the log.*
# defaults and message.max.bytes through their LogConfig, max.connections* are read per
# accept. Settings kafkalite does not apply (config.IGNORED) are kept and logged as such.
from __future__ import annotations

import json
import logging
import os
from typing import Any

from ..config import (BROKER_LEVEL, DEFAULT_LEVEL, IGNORED, PROPS, BrokerConfig, ConfigError,
                      ignored_settings, parse_prop)
from ..fileio import atomic_write
from ..wire.errors import ErrorCode, KafkaError

log = logging.getLogger("kafkalite.broker")

STATE_FILE = "dynamic-broker-configs.json"
# DynamicBrokerConfig.PerBrokerConfigs among kafkalite's properties.
PER_BROKER = ("listeners", "advertised.listeners")
# Dynamic in Kafka, refused by kafkalite (its listener is bound once, at start).
NOT_LIVE = ("listeners", "advertised.listeners")
# DynamicThreadPool.ReconfigurableConfigs.
THREAD_POOLS = ("num.network.threads", "num.io.threads")


def _scala_set(names: list[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _check_thread_count(name: str, new: int, current: int) -> None:
    """DynamicThreadPool.validateReconfiguration, wrapped as Kafka's ConfigAdminManager
    reports it."""
    if new == current:
        return
    problem = None
    if new < current // 2:
        problem = f"value should be at least half the current value {current}"
    elif new > current * 2:
        problem = f"value should not be greater than double the current value {current}"
    if problem is not None:
        raise _invalid("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic "
                       f"thread count update validation failed for {name}={new}, {problem} "
                       "for configuration Invalid dynamic configuration")


def validate(cfg: BrokerConfig, level: str, new: dict[str, str]) -> None:
    """Check the complete new set of one level, in Kafka's order; raises KafkaError."""
    fixed = [n for n in new if n in PROPS and PROPS[n].read_only]
    if fixed:
        raise _invalid(f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    parsed: dict[str, Any] = {}
    for name, raw in new.items():
        if name in PROPS:
            try:
                parsed[name] = parse_prop(PROPS[name], raw)
            except ConfigError as e:
                raise _invalid(str(e)) from None
    per_broker = [n for n in new if n in PER_BROKER]
    if level == DEFAULT_LEVEL and per_broker:
        raise _invalid("Cannot update these configs at default cluster level, broker id must "
                       f"be specified: {_scala_set(per_broker)}")
    for name in THREAD_POOLS:
        if name in parsed:
            _check_thread_count(name, parsed[name], cfg[name])
    not_live = [n for n in new if n in NOT_LIVE]
    if not_live:
        raise _invalid(f"Cannot update these configs dynamically: {_scala_set(not_live)} "
                       "(kafkalite binds its listener only at startup)")


def alter(broker, level: str, new: dict[str, str], validate_only: bool) -> None:
    """Make `new` the complete dynamic set of `level`: validate, persist, apply."""
    cfg: BrokerConfig = broker.config
    validate(cfg, level, new)
    if validate_only:
        return
    state = {lv: dict(values) for lv, values in cfg.dynamic.items()}
    state[level] = dict(new)
    try:
        _save(cfg, state)
    except OSError as e:
        raise KafkaError(ErrorCode.kafka_storage_error,
                         f"Cannot persist the dynamic broker configs: {e}") from None
    old = cfg.dynamic[level]
    cfg.set_dynamic(level, new)
    refresh_topics(broker)
    changed = sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))
    log.info("Dynamic broker configs (%s level) changed: %s", level, ", ".join(changed))
    for name in changed:
        if name in IGNORED and name in new:
            log.warning("%s=%s is kept but not applied by kafkalite: %s", name, new[name],
                        IGNORED[name])


def refresh_topics(broker) -> None:
    """Topics without an override inherit a changed broker default at once, as in Kafka."""
    logs = broker.logs
    for topic in list(logs.topics.values()):
        lc = logs.log_config(topic.configs)
        for p in topic.partitions:
            p.config = lc


def state_path(cfg: BrokerConfig) -> str:
    return os.path.join(os.path.abspath(cfg.data_dir), ".kafkalite", STATE_FILE)


def _save(cfg: BrokerConfig, state: dict[str, dict[str, str]]) -> None:
    path = state_path(cfg)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, json.dumps(state, indent=1, sort_keys=True).encode())


def open_configs(cfg: BrokerConfig) -> None:
    """At start, before the logs open (so topics start with them): load the persisted
    dynamic configs, skipping (with an error, as Kafka) any that are no longer valid; then
    warn once about the settings kafkalite accepts but does not apply."""
    path = state_path(cfg)
    try:
        with open(path, "rb") as f:
            state = json.load(f)
    except FileNotFoundError:
        state = {}
    except (OSError, ValueError) as e:
        log.error("Ignoring the dynamic broker configs in %s: %s", path, e)
        state = {}
    for level in (DEFAULT_LEVEL, BROKER_LEVEL):
        kept = {}
        for name, raw in (state.get(level) or {}).items():
            prop = PROPS.get(name)
            try:
                if prop is not None:
                    if prop.read_only:
                        raise ConfigError("not a dynamic config")
                    parse_prop(prop, raw)
            except ConfigError as e:
                log.error("Ignoring the dynamic broker config %s=%s: %s", name, raw, e)
                continue
            kept[name] = str(raw)
        cfg.set_dynamic(level, kept)
    ignored = ignored_settings(cfg)
    if ignored:
        log.warning("Accepted but not applied by kafkalite (see COMPATIBILITY.md): %s",
                    "; ".join(ignored))
