# ShareGroupHeartbeat (key 76), v1-1.
#
# Joins (member epoch 0, with the member id the client generated), keeps alive and leaves
# (epoch -1) a KIP-932 share group; answers the member epoch, the heartbeat interval
# (share.heartbeat.interval.ms, GROUP config over group.share.heartbeat.interval.ms) and,
# when the member's assignment moved on (or it joined), the assigned partitions by topic id.
# Errors as Kafka 4.1: INVALID_REQUEST for an empty group/member id or a first heartbeat
# without topics, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED
# (group.share.max.size), GROUP_ID_NOT_FOUND when the id is a classic/consumer group.
# v0 (Kafka 4.0's early access) is not served: librdkafka 2.16 and Kafka 4.1+ clients send v1.
from __future__ import annotations

from ...coordinator.share_group import ShareGroupError
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, ms, response_module
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType
from ._share import loading_error, not_share_group_error, other_group_type, share_coordinator


@api(76, "ShareGroupHeartbeat", (1, 1))
async def handle(ctx, req):
    mod = response_module(76, ctx.api_version)
    broker = ctx.broker
    sc = share_coordinator(broker)

    def fail(code: E, message: str):
        return make(mod.ShareGroupHeartbeatResponse, throttle_time=ZERO, error_code=code,
                    error_message=message, member_id=None, member_epoch=0,
                    heartbeat_interval=ZERO, assignment=None)

    # READ on the group, then DESCRIBE on the subscribed topics (Kafka 4.x KafkaApis)
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return fail(E.group_authorization_failed, "Group authorization failed.")
    if req.subscribed_topic_names and denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                                             req.subscribed_topic_names):
        return fail(E.topic_authorization_failed, None)  # type: ignore[arg-type]
    loading = loading_error(sc)
    if loading is not None:
        return fail(*loading)
    if req.group_id and other_group_type(broker, req.group_id) is not None:
        return fail(*not_share_group_error(req.group_id))
    host = "/" + ctx.peer.rpartition(":")[0] if ":" in ctx.peer else ctx.peer
    try:
        member, send = sc.groups.heartbeat(
            req.group_id, req.member_id, req.member_epoch, req.rack_id,
            tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else None, ctx.client_id or "", host)
    except ShareGroupError as e:
        return fail(e.code, e.message)
    interval = sc.group_config(req.group_id, "share.heartbeat.interval.ms")
    if member is None:  # left
        return make(mod.ShareGroupHeartbeatResponse, throttle_time=ZERO, error_code=E.none,
                    member_id=req.member_id, member_epoch=-1,
                    heartbeat_interval=ms(int(interval)), assignment=None)
    assignment = None
    if send:
        topics = broker.logs.topics
        assignment = mod.Assignment(topic_partitions=tuple(
            mod.TopicPartitions(topic_id=topics[t].topic_id, partitions=ps)
            for t, ps in sorted(member.assignment.items()) if t in topics))
    return make(mod.ShareGroupHeartbeatResponse, throttle_time=ZERO, error_code=E.none,
                member_id=member.member_id, member_epoch=member.epoch,
                heartbeat_interval=ms(int(interval)), assignment=assignment)
