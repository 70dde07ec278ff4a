# AlterConfigs (key 33), v0-2: the legacy, non-incremental API.
#
# For a TOPIC the configs given become the topic's complete override set: any override not
# listed is removed (as in Kafka). The set is validated as a whole (INVALID_CONFIG for an
# unknown name or a bad value), then stored in the topic's metadata and applied to its
# partitions' live LogConfig, unless validate_only. Per-resource errors follow Kafka's
# ConfigAdminManager.preprocess and controller: a resource listed twice, duplicate keys or
# null values are INVALID_REQUEST; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
# The answer waits for the metadata file's durable write (off the loop); a write that fails
# is KAFKA_STORAGE_ERROR for that topic, and its change is taken back.
# In a ZooKeeper cluster (any broker takes it, as Kafka's ZooKeeper mode): the topic must exist
# in ZooKeeper (UNKNOWN_TOPIC_OR_PARTITION before any config check, as AdminZkClient), then the
# set goes to /config/topics/<t> with a /config/changes notification, and every broker applies
# it to its local log from there (cluster/config_changes.py).
# For a BROKER resource ("<node.id>" or "" for the cluster-wide defaults) the configs given
# become that level's complete dynamic set, validated, persisted and applied at once as
# Kafka's dynamic broker configs (see broker/dynamic_configs.py for what is refused).
# BROKER_LOGGER is not supported by this legacy API in Kafka either (INVALID_REQUEST).
# Gaps: GROUP and CLIENT_METRICS resources are INVALID_REQUEST.
from __future__ import annotations

from ...wire.errors import ErrorCode, KafkaError
from ..registry import api
from ...security.acl_check import config_refusal
from ...security.acls import Operation
from ._configs import (BROKER, TOPIC, alter_broker_configs, alter_response,
                       apply_topic_configs, broker_level, check_alter_resource)


async def _alter(broker, r, duplicated: bool, validate_only: bool,
                 refusal: tuple[int, str | None] | None = None) -> None:
    check_alter_resource(r, duplicated, [c.name for c in r.configs if c.value is None])
    if refusal is not None:
        raise KafkaError(*refusal)
    if r.resource_type == TOPIC:
        await apply_topic_configs(broker, r.resource_name,
                                  {c.name: c.value for c in r.configs}, validate_only)
    elif r.resource_type == BROKER:
        await alter_broker_configs(broker, broker_level(broker, r.resource_name),
                                   {c.name: c.value for c in r.configs}, validate_only)
    else:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unknown resource type {r.resource_type}")


@api(33, "AlterConfigs", (0, 2))
async def handle(ctx, req):
    async def authorized(broker, r, duplicated: bool, validate_only: bool) -> None:
        # ALTER_CONFIGS on the topic, or the cluster for BROKER; the legacy API takes no other
        # type, refused later for that (ControllerApis.authorizeAlterResource).
        refusal = config_refusal(ctx, Operation.ALTER_CONFIGS, r.resource_type,
                                 r.resource_name) if r.resource_type in (TOPIC, BROKER) else None
        await _alter(broker, r, duplicated, validate_only, refusal)

    return await alter_response(ctx, req, authorized)
