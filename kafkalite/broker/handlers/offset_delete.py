# OffsetDelete (key 47), v0.
#
# Deletes committed offsets of a group (KIP-496). An Empty group may lose any of them; a
# consumer group with members only those of topics none of its members subscribes to
# (GROUP_SUBSCRIBED_TO_TOPIC otherwise); other non-empty groups get NON_EMPTY_GROUP, unknown
# ones GROUP_ID_NOT_FOUND. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as
# Kafka's KafkaApis.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType


@api(47, "OffsetDelete", (0, 0))
async def handle(ctx, req):
    b = ctx.broker
    mod = response_module(47, ctx.api_version)
    cls = response_class(47, ctx.api_version)
    if not check(ctx, Operation.DELETE, ResourceType.GROUP, req.group_id):
        return make(cls, error_code=ErrorCode.group_authorization_failed, throttle_time=ZERO,
                    topics=())
    order = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    unread = denied(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    # READ on the topic is checked before the partition's existence, as KafkaApis
    errors = {tp: ErrorCode.topic_authorization_failed if tp[0] in unread
              else ErrorCode.unknown_topic_or_partition for tp in order
              if tp[0] in unread or b.logs.partition(*tp) is None}
    valid = [tp for tp in order if tp not in errors]
    err, results = b.groups.delete_offsets(req.group_id, valid)
    if err != ErrorCode.none:
        return make(cls, error_code=err, throttle_time=ZERO, topics=())
    errors.update(results)
    by_topic: dict[str, list] = {}
    for name, idx in order:
        by_topic.setdefault(name, []).append(mod.OffsetDeleteResponsePartition(
            partition_index=idx, error_code=errors.get((name, idx), ErrorCode.none)))
    return make(cls, error_code=err, throttle_time=ZERO,
                topics=tuple(mod.OffsetDeleteResponseTopic(name=n, partitions=tuple(ps))
                             for n, ps in by_topic.items()))
