# AlterShareGroupOffsets (key 91), v0-0.
#
# Sets share-partitions' start offsets (kafka-share-groups.sh --reset-offsets): each named
# partition's state starts over at the offset given (a ShareSnapshot with the next state
# epoch in __share_group_state, as Kafka's InitializeShareGroupState), nothing in flight.
# Kafka's errors: a group with members NON_EMPTY_GROUP (top level), an id that is a
# classic/consumer group GROUP_ID_NOT_FOUND, an unknown topic or partition
# UNKNOWN_TOPIC_OR_PARTITION (per partition). A group not yet known is created by it.
from __future__ import annotations

from ...wire.errors import ErrorCode as E
from ..build import make
from ..registry import api
from ...security.acls import Operation
from ._share import group_refusal, offsets_request


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
                code, msg = (E.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
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
    return await offsets_request(ctx, req, "AlterShareGroupOffsetsResponse", False, answer)
