# Metadata (key 3), v0-12.
#
# One broker (node.id at advertised.listeners) leads every partition with leader epoch 0 and
# is the only replica and ISR member. A null topic list (empty at v0) means all topics,
# internal ones flagged. Unknown topics are auto-created with num.partitions when
# auto.create.topics.enable and the request allows it (v4+ flag; always before v4), and
# come back at once with their partitions (Kafka may first answer LEADER_NOT_AVAILABLE;
# clients accept both). Invalid names get INVALID_TOPIC_EXCEPTION. Lookup by topic id
# (v10+) answers UNKNOWN_TOPIC_ID for ids it does not know.
# Gaps: authorized operations are not computed (Int.MIN, as Kafka when not requested).
from __future__ import annotations

import uuid

from ...log.manager import Topic, validate_topic_name
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api

NO_OPS = -2147483648
ZERO_UUID = uuid.UUID(int=0)


def _topic_entry(mod, broker, topic: Topic):
    node = broker.node_id
    parts = tuple(make(mod.MetadataResponsePartition, error_code=ErrorCode.none,
                       partition_index=i, leader_id=node, leader_epoch=0,
                       replica_nodes=(node,), isr_nodes=(node,), offline_replicas=())
                  for i in range(len(topic.partitions)))
    return make(mod.MetadataResponseTopic, error_code=ErrorCode.none, name=topic.name,
                topic_id=topic.topic_id, is_internal=topic.internal, partitions=parts,
                topic_authorized_operations=NO_OPS)


def _error_entry(mod, name, code: ErrorCode, topic_id=ZERO_UUID):
    return make(mod.MetadataResponseTopic, error_code=code, name=name, topic_id=topic_id,
                is_internal=False, partitions=(), topic_authorized_operations=NO_OPS)


@api(3, "Metadata", (0, 12))
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    mod = response_module(3, v)
    logs = b.logs
    entries = []
    if req.topics is None or (v == 0 and not req.topics):
        entries = [_topic_entry(mod, b, t) for t in list(logs.topics.values())]
    else:
        allow = getattr(req, "allow_auto_topic_creation", True)
        for t in req.topics:
            name = t.name
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid != ZERO_UUID:
                topic = logs.by_id.get(tid)
                entries.append(_topic_entry(mod, b, topic) if topic else
                               _error_entry(mod, None, ErrorCode.unknown_topic_id, tid))
                continue
            topic = logs.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                    topic = b.auto_create(name) if allow else None
                except KafkaError as e:
                    entries.append(_error_entry(mod, name, e.code))
                    continue
            entries.append(_topic_entry(mod, b, topic) if topic else
                           _error_entry(mod, name, ErrorCode.unknown_topic_or_partition))
    broker = make(mod.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port,
                  rack=None)
    return make(response_class(3, v), throttle_time=ZERO, brokers=(broker,),
                cluster_id=b.logs.cluster_id, controller_id=b.node_id,
                topics=tuple(entries), cluster_authorized_operations=NO_OPS)
