# DescribeTopicPartitions (key 75), v0.
#
# Kafka 3.8's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache: the named topics
# (or, with an empty list, every topic) from the cursor's topic on, sorted by name, with at
# most response_partition_limit partitions (clamped to 1..2000, Kafka's
# max.request.partition.size.limit default). When the limit cuts a topic short, next_cursor
# names the first partition left out; when it is used up exactly before the next topic,
# next_cursor names that topic's partition 0, whether it exists or not. Named topics that do
# not exist are UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name) and
# count nothing against the limit; the all-topics form lists only existing ones. A cursor
# topic missing from the named topics, or a negative cursor partition, is INVALID_REQUEST for
# every named topic. topic_authorized_operations: the principal's (every TOPIC operation
# without an authorizer). With ACLs, named topics without DESCRIBE follow the others as
# TOPIC_AUTHORIZATION_FAILED (zero id) and the all-topics form leaves them out.
# Leaders, epochs, replicas and ISR come from the broker's cluster view. ELR fields are
# empty lists (no KIP-966).
from __future__ import annotations

import uuid

from ...log.manager import validate_topic_name
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import authorized_operations, denied
from ...security.acls import Operation, ResourceType
from .metadata import NO_OPS, TOPIC_OPS

MAX_PARTITIONS = 2000  # max.request.partition.size.limit


def _partition(mod, state, index: int):
    return mod.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.none, partition_index=index, leader_id=state.leader,
        leader_epoch=state.leader_epoch, replica_nodes=state.replicas, isr_nodes=state.isr,
        eligible_leader_replicas=(), last_known_elr=(),
        offline_replicas=state.offline_replicas)


def _topic(mod, code, name, topic_id, internal, parts, ops=TOPIC_OPS):
    return mod.DescribeTopicPartitionsResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=internal,
        partitions=tuple(parts), topic_authorized_operations=ops)


@api(75, "DescribeTopicPartitions", (0, 0))
async def handle(ctx, req):
    b = ctx.broker
    mod = response_module(75, 0)
    cls = response_class(75, 0)
    cursor = req.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    names = set(b.view.topic_names()) if fetch_all else {t.name for t in req.topics}
    names = {n for n in names if n >= start_name}
    problem = None
    if not fetch_all and cursor is not None and cursor.topic_name not in names:
        problem = ("DescribeTopicPartitionsRequest topic list should contain the cursor "
                   f"topic: {cursor.topic_name}")
    elif cursor is not None and cursor.partition_index < 0:
        problem = "DescribeTopicPartitionsRequest cursor partition must be valid"
    if problem is not None:
        return make(cls, throttle_time=ZERO, next_cursor=None, topics=tuple(
            _topic(mod, ErrorCode.invalid_request, t.name, uuid.UUID(int=0), False, (),
                   NO_OPS) for t in req.topics))
    # DESCRIBE on each topic, before its existence is looked at: named ones refused are
    # answered after the others, the all-topics form leaves them out (Kafka 3.8's handler).
    refused = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
    remaining = max(min(MAX_PARTITIONS, req.response_partition_limit), 1)
    out, next_cursor = [], None
    for name in sorted(names - refused):
        if remaining == 0:
            next_cursor = mod.Cursor(topic_name=name, partition_index=0)
            break
        topic = b.view.topic(name)  # the cluster's, with or without a replica here
        if topic is None:
            if not fetch_all:
                try:
                    validate_topic_name(name)
                    code = ErrorCode.unknown_topic_or_partition
                except KafkaError:
                    code = ErrorCode.invalid_topic_exception
                out.append(_topic(mod, code, name, uuid.UUID(int=0), False, ()))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        states = b.view.partitions(name)
        count = len(states)
        upper = min(count, first + remaining)
        out.append(_topic(mod, ErrorCode.none, name, topic.topic_id, topic.internal,
                          [_partition(mod, states[i], i) for i in range(first, upper)],
                          authorized_operations(ctx, ResourceType.TOPIC, name)))
        if upper < count:
            next_cursor = mod.Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= max(upper - first, 0)
    if not fetch_all:
        out += [_topic(mod, ErrorCode.topic_authorization_failed, n, uuid.UUID(int=0), False,
                       (), NO_OPS) for n in sorted(refused)]
    return make(cls, throttle_time=ZERO, topics=tuple(out), next_cursor=next_cursor)
