# DescribeConfigs (key 32), v1-4 (Kafka 4.0 dropped v0).
#
# TOPIC resources answer every topic config (Kafka 3.9's set) with its effective value,
# source and synonyms (see _configs.py for how sources are resolved); in a ZooKeeper cluster
# a topic with no replica on this broker is answered from /config/topics, as Kafka's
# ZooKeeper-mode brokers do; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal name
# INVALID_TOPIC_EXCEPTION. BROKER resources named by this node's id answer every broker
# property (DYNAMIC_BROKER_CONFIG, then DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG
# when set at startup, DEFAULT_CONFIG; read_only as Kafka marks dynamic configs); the empty
# name means the cluster-wide dynamic defaults and answers those that are set; another id is
# INVALID_REQUEST (ConfigHelper.describeConfigs). BROKER_LOGGER lists Python's loggers with
# log4j level names. Synonyms only with include_synonyms; config_type (v3+) always;
# documentation (v3+) only with include_documentation, null where kafkalite has none. GROUP
# (Kafka 4.0; 3.8 answers INVALID_REQUEST): the six group configs, GROUP_CONFIG where the
# group overrides one, else DEFAULT_CONFIG with the broker's group.consumer.* / group.share.*
# setting as value (as Kafka 4.x's GroupConfigManager); any group name, known or not, as
# Kafka; the empty name INVALID_REQUEST. Gaps: CLIENT_METRICS resources answer
# INVALID_REQUEST.
from __future__ import annotations

from ...log.manager import validate_topic_name
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import config_refusal
from ...security.acls import Operation
from .find_coordinator import INVALID_REQUEST_MESSAGE
from ._configs import (BROKER, BROKER_LOGGER, GROUP, RESOURCE_NAMES, TOPIC, Entry,
                       broker_entries, cluster_configs, default_entries, group_entries,
                       logger_entries, node_id_of, select, topic_entries)


async def _entries(broker, rtype: int, name: str) -> list[Entry]:
    if rtype == TOPIC:
        validate_topic_name(name)
        topic = broker.logs.get(name)
        if topic is not None:
            return topic_entries(broker.logs, topic.configs)
        changes = cluster_configs(broker)
        if changes is not None and broker.view.topic(name) is not None:
            # no replica here: the cluster's configs, as a ZooKeeper-mode Kafka broker reads
            return topic_entries(broker.logs, await changes.topic_overrides(name))
        raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
    if rtype == BROKER:
        if not name:
            return default_entries(broker.config)
        if node_id_of(name) != broker.node_id:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unexpected broker id, expected {broker.node_id} or empty "
                             f"string, but received {name}")
        return broker_entries(broker.config)
    if rtype == BROKER_LOGGER:
        if not name:
            raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
        if node_id_of(name) != broker.node_id:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unexpected broker id, expected {broker.node_id} but received "
                             f"{name}")
        return logger_entries()
    if rtype == GROUP:
        return group_entries(broker, name)
    if rtype not in RESOURCE_NAMES:  # Kafka names no reason for a type it does not know
        raise KafkaError(ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE)
    raise KafkaError(ErrorCode.invalid_request,
                     f"Unsupported resource type: {RESOURCE_NAMES[rtype]}")


def _config(mod, e: Entry, synonyms: bool, docs: bool):
    syns = tuple(mod.DescribeConfigsSynonym(name=n, value=v, source=s)
                 for n, v, s in e.synonyms) if synonyms else ()
    return make(mod.DescribeConfigsResourceResult, name=e.name, value=e.value,
                read_only=e.read_only, config_source=e.source, is_sensitive=e.sensitive,
                synonyms=syns, config_type=e.type_id, documentation=e.doc if docs else None)


@api(32, "DescribeConfigs", (1, 4))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(32, v)
    synonyms = bool(req.include_synonyms)
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    # Resources refused DESCRIBE_CONFIGS are answered after the others, as KafkaApis does.
    refusals = {id(r): config_refusal(ctx, Operation.DESCRIBE_CONFIGS, r.resource_type,
                                      r.resource_name) for r in req.resources}
    for r in sorted(req.resources, key=lambda r: refusals[id(r)] is not None):
        if refusals[id(r)] is not None:
            code, message = refusals[id(r)]  # type: ignore[misc]
            results.append(mod.DescribeConfigsResult(
                error_code=code, error_message=message, resource_type=r.resource_type,
                resource_name=r.resource_name, configs=()))
            continue
        try:
            entries = select(await _entries(ctx.broker, r.resource_type, r.resource_name),
                             r.configuration_keys)
            code, message = ErrorCode.none, ""  # Kafka's ApiError.NONE answers "", not null
        except KafkaError as e:
            entries, code, message = [], e.code, e.message or ""
        results.append(mod.DescribeConfigsResult(
            error_code=code, error_message=message, resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=tuple(_config(mod, e, synonyms, docs)
                          for e in sorted(entries, key=lambda e: e.name))))
    return make(response_class(32, v), throttle_time=ZERO, results=tuple(results))
