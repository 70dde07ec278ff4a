# DeleteShareGroupOffsets (key 92), v0-0.
#
# Deletes a share group's state for whole topics (kafka-share-groups.sh --delete-offsets):
# every share-partition of each topic named is forgotten (tombstones in
# __share_group_state); a later share fetch starts it again from share.auto.offset.reset.
# Kafka's errors: GROUP_ID_NOT_FOUND for an unknown id or a classic/consumer group's,
# NON_EMPTY_GROUP (top level) while the group has members, UNKNOWN_TOPIC_OR_PARTITION for a
# topic that does not exist (per topic). ACLs (Kafka 4.x
# KafkaApis.handleDeleteShareGroupOffsetsRequest): DELETE on the group (the whole answer
# GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED, listed first).
from __future__ import annotations

from ...wire.errors import ErrorCode as E
from ..build import make
from ..registry import api
from ...security.acls import Operation
from ._share import TOPIC_REFUSED, group_refusal, offsets_request, topic_readable


@api(92, "DeleteShareGroupOffsets", (0, 0))
async def handle(ctx, req):
    gid = req.group_id
    if (refused := group_refusal(ctx, Operation.DELETE, gid)) is not None:
        return refused

    async def answer(mod, sc, t, topic):
        if topic is None:
            return make(mod.DeleteShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                        topic_id=None, error_code=E.unknown_topic_or_partition,
                        error_message="This server does not host this topic-partition.")
        name = t.topic_name
        await sc.delete_state(lambda k: k[0] == gid and k[1] == name)
        return make(mod.DeleteShareGroupOffsetsResponseTopic, topic_name=name,
                    topic_id=topic.topic_id, error_code=E.none)
    def refuse(mod, t, topic):
        # READ on each topic (Kafka 4.x KafkaApis.handleDeleteShareGroupOffsetsRequest):
        # refused topics come first, without their id, and keep their state.
        if topic_readable(ctx, t.topic_name):
            return None
        return make(mod.DeleteShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                    topic_id=None, error_code=E.topic_authorization_failed,
                    error_message=TOPIC_REFUSED)
    return await offsets_request(ctx, req, "DeleteShareGroupOffsetsResponse", True, answer,
                                 refuse)
