# AlterShareGroupOffsets (key 91), v0-0.
#
# Sets share-partitions' start offsets (kafka-share-groups.sh --reset-offsets): each named
# partition's state starts over at the offset given (a ShareSnapshot with the next state
# epoch in __share_group_state, as Kafka's InitializeShareGroupState), nothing in flight.
# Kafka's errors: a group with members NON_EMPTY_GROUP (top level), an id that is a
# classic/consumer group GROUP_ID_NOT_FOUND, an unknown topic or partition
# UNKNOWN_TOPIC_OR_PARTITION (per partition). A group not yet known is created by it.
# ACLs (Kafka 4.x KafkaApis.handleAlterShareGroupOffsetsRequest): READ on the group (the
# whole answer GROUP_AUTHORIZATION_FAILED), READ on each topic (its partitions
# TOPIC_AUTHORIZATION_FAILED, answered first with the unknown topics, nothing of it altered).
from __future__ import annotations

from ...wire.errors import ErrorCode as E
from ..build import make
from ..registry import api
from ...security.acls import Operation
from ._share import TOPIC_REFUSED, group_refusal, offsets_request, topic_readable

UNKNOWN_MESSAGE = "This server does not host this topic-partition."


@api(91, "AlterShareGroupOffsets", (0, 0))
async def handle(ctx, req):
    gid = req.group_id
    if (refused := group_refusal(ctx, Operation.READ, gid)) is not None:
        return refused

    async def answer(mod, sc, t, topic):
        entries = []
        for p in t.partitions:
            code: E = E.none
            msg = None
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                code, msg = E.unknown_topic_or_partition, UNKNOWN_MESSAGE
            elif p.start_offset < 0:
                code, msg = E.invalid_request, f"Invalid start offset {p.start_offset}."
            else:
                await sc.reset_start(gid, t.topic_name, p.partition_index, topic.topic_id,
                                     p.start_offset)
            entries.append(make(mod.AlterShareGroupOffsetsResponsePartition,
                                partition_index=p.partition_index, error_code=code,
                                error_message=msg))
        return make(mod.AlterShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                    topic_id=topic.topic_id if topic else None, partitions=tuple(entries))
    def refuse(mod, t, topic):
        # READ on each topic, then its existence (Kafka 4.x
        # KafkaApis.handleAlterShareGroupOffsetsRequest): both answered before the group's
        # own checks, the topic id shown when the topic exists.
        if topic_readable(ctx, t.topic_name):
            if topic is not None:
                return None
            code, msg = E.unknown_topic_or_partition, UNKNOWN_MESSAGE
        else:
            code, msg = E.topic_authorization_failed, TOPIC_REFUSED
        return make(mod.AlterShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                    topic_id=topic.topic_id if topic else None, partitions=tuple(
                        make(mod.AlterShareGroupOffsetsResponsePartition,
                             partition_index=p.partition_index, error_code=code,
                             error_message=msg) for p in t.partitions))
    return await offsets_request(ctx, req, "AlterShareGroupOffsetsResponse", False, answer,
                                 refuse)
