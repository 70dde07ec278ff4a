# IncrementalAlterConfigs (key 44), v0-1.
#
# TOPIC resources: each config carries an operation, SET (0), DELETE (1, revert to the
# default), APPEND (2) or SUBTRACT (3). APPEND/SUBTRACT work on list-typed configs only
# (INVALID_CONFIG "Can't APPEND to key ... because its type is not LIST." otherwise), and
# start from the topic's override or else the topic default, as Kafka's
# ConfigurationControlManager does. The resulting override set is validated as a whole
# (INVALID_CONFIG), then stored and applied to the live partitions unless validate_only; an
# unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a metadata write that fails is
# KAFKA_STORAGE_ERROR for that topic (its change taken back), as in AlterConfigs; in a
# ZooKeeper cluster the ops apply to ZooKeeper's override set and the result is written there
# as AlterConfigs does (cluster/config_changes.py). BROKER
# resources ("<node.id>", or "" for the cluster-wide defaults) change that level's dynamic
# configs the same way (APPEND/SUBTRACT on a non-list config: INVALID_CONFIG "Config value
# append is not allowed for config key"), then validate, persist and apply the result
# (broker/dynamic_configs.py); DELETE is never refused, as in Kafka. BROKER_LOGGER resources
# set (SET) or reset (DELETE) a Python logger's level using log4j level names, validated as
# Kafka's RuntimeLoggerManager does; they are never persisted.
# GROUP resources (Kafka 4.0; 3.8 answers INVALID_REQUEST "Unknown resource type 32"): SET /
# DELETE on a group's overrides (APPEND/SUBTRACT: not LIST, INVALID_CONFIG); the result is
# validated as a whole with GroupConfig's names, bounds and cross-checks (INVALID_CONFIG),
# then persisted (coordinator/group_configs.py); the empty name is INVALID_REQUEST.
# Gaps: CLIENT_METRICS resources are INVALID_REQUEST.
from __future__ import annotations

import logging

from ...config import PROPS, TOPIC_PROP_MAP, format_value
from ...coordinator.group_configs import GroupConfigError, validate as validate_group
from ...wire.errors import ErrorCode, KafkaError
from ..registry import api
from ...security.acl_check import config_refusal
from ...security.acls import Operation
from ._configs import (BROKER, BROKER_LOGGER, GROUP, LOG_LEVELS, ROOT_LOGGER, TOPIC,
                       alter_broker_configs, alter_response, apply_topic_configs,
                       broker_dynamic, broker_level,
                       check_alter_resource, group_store, loggers, node_id_of,
                       topic_overrides)

log = logging.getLogger("kafkalite.broker")

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _list_op(op: int, name: str, current: str | None, value: str, broker: bool = False) -> str:
    """APPEND or SUBTRACT on a list config, from its value at this level or its default."""
    prop = (PROPS if broker else TOPIC_PROP_MAP).get(name)
    if prop is None or prop.type != "list":
        if broker:  # checked by Kafka's broker before the controller sees it
            message = f"Config value {OP_NAMES[op].lower()} is not allowed for config key: {name}"
        else:
            message = f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST."
        raise KafkaError(ErrorCode.invalid_config, message)
    base = current if current is not None else format_value(prop.default) or ""
    parts = [p for p in base.split(",") if p]
    for item in value.split(","):
        if op == APPEND and item not in parts:
            parts.append(item)
        elif op == SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)


def _apply_ops(current: dict[str, str], ops, broker: bool = False) -> dict[str, str | None]:
    """The resource's new config set (a topic's overrides, or a broker level's dynamic
    configs) after `ops`."""
    new: dict[str, str | None] = dict(current)
    for c in ops:
        op = c.config_operation
        if op == SET:
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            new[c.name] = _list_op(op, c.name, current.get(c.name), c.value, broker)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operations type {op}")
    return new


def _loggers(broker, name: str, ops, validate_only: bool) -> None:
    if node_id_of(name, "Node id") != broker.node_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected node id. Expected {broker.node_id}, but received {name}")
    known = loggers()
    for c in ops:
        op = c.config_operation
        if op in (SET, DELETE) and c.name not in known:
            raise KafkaError(ErrorCode.invalid_config, f"Logger {c.name} does not exist!")
        if op == SET and c.value not in LOG_LEVELS:
            raise KafkaError(ErrorCode.invalid_config,
                             f"Cannot set the log level of {c.name} to {c.value} as it is not "
                             "a supported log level. Valid log levels are "
                             + ", ".join(sorted(LOG_LEVELS)))
        if op == DELETE and c.name == ROOT_LOGGER:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        if op in (APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request,
                             f"{OP_NAMES[op]} operation is not allowed for the BROKER_LOGGER "
                             "resource")
        if op not in OP_NAMES:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unknown operation type {op} is not allowed for the "
                             "BROKER_LOGGER resource")
    if validate_only:
        return
    for c in ops:
        known[c.name].setLevel(LOG_LEVELS[c.value] if c.config_operation == SET
                               else logging.NOTSET)
        log.warning("Log level of %s set to %s", c.name,
                    c.value if c.config_operation == SET else "its parent's")


def _groups(broker, name: str, ops, validate_only: bool) -> None:
    """ControllerConfigurationValidator's GROUP case, then the store."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    store = group_store(broker)
    new = _apply_ops(store.get(name), ops)
    try:
        validate_group(new, broker.config)  # type: ignore[arg-type]
    except GroupConfigError as e:
        raise KafkaError(ErrorCode.invalid_config, str(e)) from None
    if validate_only:
        return
    try:
        store.set(name, new)  # type: ignore[arg-type]
    except OSError as e:
        raise KafkaError(ErrorCode.kafka_storage_error,
                         f"Cannot persist the group configs: {e}") from None


async def _alter(broker, r, duplicated: bool, validate_only: bool,
                 refusal: tuple[int, str | None] | None = None) -> None:
    check_alter_resource(r, duplicated, [c.name for c in r.configs
                                         if c.value is None and c.config_operation != DELETE])
    if refusal is not None:  # after the request's own checks, as Kafka's broker preprocess
        raise KafkaError(*refusal)
    if r.resource_type == TOPIC:
        current = await topic_overrides(broker, r.resource_name)
        await apply_topic_configs(broker, r.resource_name,
                                  _apply_ops(current, r.configs), validate_only)
    elif r.resource_type == BROKER:
        for c in r.configs:
            if c.config_operation not in OP_NAMES:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Unknown operations type {c.config_operation}")
        level = broker_level(broker, r.resource_name)
        new = _apply_ops(await broker_dynamic(broker, level), r.configs, broker=True)
        await alter_broker_configs(broker, level, new, validate_only)  # type: ignore[arg-type]
    elif r.resource_type == BROKER_LOGGER:
        _loggers(broker, r.resource_name, r.configs, validate_only)
    elif r.resource_type == GROUP:
        _groups(broker, r.resource_name, r.configs, validate_only)
    else:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unknown resource type {r.resource_type}")


@api(44, "IncrementalAlterConfigs", (0, 1))
async def handle(ctx, req):
    async def authorized(broker, r, duplicated: bool, validate_only: bool) -> None:
        refusal = config_refusal(ctx, Operation.ALTER_CONFIGS, r.resource_type,
                                 r.resource_name)
        if refusal is not None and r.resource_type == BROKER_LOGGER:
            refusal = refusal[0], None  # refused by Kafka's broker itself, without a message
        await _alter(broker, r, duplicated, validate_only, refusal)

    return await alter_response(ctx, req, authorized)
