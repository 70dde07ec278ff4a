# AlterClientQuotas (key 49), v0-1.
#
# Sets or removes quota values per entity, validated as Kafka's ClientQuotaControlManager:
# user / client-id entities take producer_byte_rate, consumer_byte_rate (integral),
# request_percentage and controller_mutation_rate; ip entities connection_creation_rate
# (integral); values must be > 0; ip cannot be combined with the others; every refusal is
# INVALID_REQUEST with Kafka's message. A repeated quota key, or an entity given twice, is
# answered "Ignoring duplicate entity ..." (the first occurrence of a repeated entity is
# still applied, as in Kafka). validate_only checks without applying. One result per
# distinct entity, in Kafka's (HashMap) order. Changes persist under .kafkalite/ and apply
# to the next request. v1 is the flexible version. In a ZooKeeper cluster the changes go to
# the entity's /config/users|clients|ips znode (merged with its other keys, then announced, as
# Kafka's ZooKeeper mode) before the answer, and every broker applies them from there
# (cluster/entity_configs.py); a failed ZooKeeper write answers UNKNOWN_SERVER_ERROR.
# Gaps: an ip entity must be a literal address (Kafka also resolves host names);
# connection_creation_rate and controller_mutation_rate are stored, not enforced.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ...wire.errors import ErrorCode
from ..quotas import commit_plan
from ..registry import api
from ...security.acl_check import CLUSTER_AUTHORIZATION_FAILED, cluster
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


@api(49, "AlterClientQuotas", (0, 1))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(49, v)
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                 [(op.key, op.value, op.remove) for op in entry.ops]) for entry in req.entries]
    if cluster(ctx, Operation.ALTER_CONFIGS):
        results, changed = ctx.broker.quotas.plan(entries, req.validate_only)
        if (e := await commit_plan(ctx.broker, "quotas", changed)) is not None:
            results = [(entity, e.code if code == ErrorCode.none else code,
                        e.message if code == ErrorCode.none else m)
                       for entity, code, m in results]
    else:
        results = [(entity, DENIED, CLUSTER_AUTHORIZATION_FAILED)
                   for entity, _ops in entries]
    return make(response_class(49, v), throttle_time=ZERO, entries=tuple(
        mod.EntryData(error_code=code, error_message=message,
                      entity=tuple(mod.EntityData(entity_type=t, entity_name=n)
                                   for t, n in entity))
        for entity, code, message in results))
