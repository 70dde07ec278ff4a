# DescribeClientQuotas (key 48), v0-1.
#
# Answers from the broker's quota configs as Kafka's ClientQuotasImage.describe: filter
# components match an exact name (0), the default entity (1) or any entity of that type,
# defaults included (2); `strict` drops entities with other types besides. A refused filter
# (empty or repeated type, a match string where none belongs, ip with user or client-id,
# unknown match type) is INVALID_REQUEST and an unknown entity type UNSUPPORTED_VERSION, with
# Kafka's messages and null entries; success carries error_message "" as Kafka's does.
# Entries, entity parts and values come in the order Kafka's HashMaps give them.
# v1 is the flexible version; nothing else differs.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..quotas import describe_entries
from ..registry import api
from ...security.acl_check import cluster
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


@api(48, "DescribeClientQuotas", (0, 1))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(48, v)
    cls = response_class(48, v)
    if not cluster(ctx, Operation.DESCRIBE_CONFIGS):  # Kafka sends no message here
        return make(cls, throttle_time=ZERO, error_code=DENIED, error_message=None,
                    entries=None)
    try:
        found = ctx.broker.quotas.describe(describe_entries(req.components), req.strict)
    except KafkaError as e:
        return make(cls, throttle_time=ZERO, error_code=e.code, error_message=e.message,
                    entries=None)
    entries = tuple(
        mod.EntryData(entity=tuple(mod.EntityData(entity_type=t, entity_name=n)
                                   for t, n in entity),
                      values=tuple(mod.ValueData(key=k, value=val) for k, val in values))
        for entity, values in found)
    return make(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message="",
                entries=entries)
