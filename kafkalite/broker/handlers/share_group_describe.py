# ShareGroupDescribe (key 77), v1-1.
#
# State ("Empty"/"Stable"), group epoch, assignment epoch, assignor ("simple") and each
# member with its subscription and assignment, for KIP-932 share groups. An unknown id is
# GROUP_ID_NOT_FOUND ("Group X not found."), a classic/consumer group's id
# GROUP_ID_NOT_FOUND ("Group X is not a share group."), as Kafka 4.1. Authorized operations
# (asked for) are READ, DESCRIBE and DELETE, as DescribeGroups answers without ACLs.
# ACLs (Kafka 4.x KafkaApis.handleShareGroupDescribe): DESCRIBE on each group
# (GROUP_AUTHORIZATION_FAILED, no message); a group whose members' assignments name a topic
# the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with Kafka's message.
from __future__ import annotations

from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType
from ._share import loading_error, not_share_group_error, other_group_type, share_coordinator
from .consumer_group_describe import hide_undescribable, refusal
from .describe_groups import GROUP_OPS, NO_OPS


@api(77, "ShareGroupDescribe", (1, 1))
async def handle(ctx, req):
    mod = response_module(77, ctx.api_version)
    broker = ctx.broker
    sc = share_coordinator(broker)
    ops = GROUP_OPS if req.include_authorized_operations else NO_OPS
    topics = broker.logs.topics
    out = []
    refused = denied(ctx, Operation.DESCRIBE, ResourceType.GROUP, req.group_ids)
    # refused groups first, as Kafka 4.x adds them before asking its coordinator
    out += [refusal(mod, gid, E.group_authorization_failed)
            for gid in req.group_ids if gid in refused]
    for gid in req.group_ids:
        group = sc.groups.groups.get(gid)
        if gid in refused:
            continue
        if group is None or sc.loading:
            code, msg = loading_error(sc) or (
                not_share_group_error(gid) if other_group_type(broker, gid)
                else (E.group_id_not_found, f"Group {gid} not found."))
            out.append(make(mod.DescribedGroup, error_code=code, error_message=msg,
                            group_id=gid, group_state="Dead", group_epoch=-1,
                            assignment_epoch=-1, assignor_name="", members=(),
                            authorized_operations=NO_OPS))
            continue
        members = tuple(make(
            mod.Member, member_id=m.member_id, rack_id=m.rack, member_epoch=m.epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.topics,
            assignment=mod.Assignment(topic_partitions=tuple(
                mod.TopicPartitions(topic_id=topics[t].topic_id, topic_name=t, partitions=ps)
                for t, ps in sorted(m.assignment.items()) if t in topics)))
            for m in group.members.values())
        out.append(make(mod.DescribedGroup, error_code=E.none, group_id=gid,
                        group_state=group.state, group_epoch=group.epoch,
                        assignment_epoch=group.epoch, assignor_name="simple",
                        members=members, authorized_operations=ops))
    return make(mod.ShareGroupDescribeResponse, throttle_time=ZERO, groups=hide_undescribable(
        ctx, mod, out, lambda m: m.assignment.topic_partitions))
