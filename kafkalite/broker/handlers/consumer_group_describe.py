# ConsumerGroupDescribe (key 69), v0-1.
#
# The KIP-848 view of consumer groups: state (Empty, Assigning, Reconciling, Stable), group
# epoch, target assignment epoch, the assignor of the current target, and per member its
# epoch, subscriptions, current and target assignments. A group id that is not a consumer
# group answers GROUP_ID_NOT_FOUND ("Group X not found." / "Group X is not a consumer
# group." for a classic one), as Kafka 4.x. Version notes: v1 adds each member's type
# (1: a consumer-protocol member; classic members of consumer groups are not served).
# Authorized operations: READ, DELETE and DESCRIBE when asked (no ACLs), else Int.MIN.
# ACLs (Kafka 4.x KafkaApis.handleConsumerGroupDescribe): DESCRIBE on each group
# (GROUP_AUTHORIZATION_FAILED, no message, listed first); a group whose members' current or
# target assignments name a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED
# with Kafka's message and no members.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import authorized_operations, denied
from ...security.acls import Operation, ResourceType
from .consumer_group_heartbeat import consumer_coordinator
from .describe_groups import GROUP_OPS, NO_OPS


@api(69, "ConsumerGroupDescribe", (0, 1))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(69, v)
    b = ctx.broker
    cg = consumer_coordinator(b)
    topics = b.logs.topics
    ops = GROUP_OPS if req.include_authorized_operations else NO_OPS

    def assignment(a):
        return mod.Assignment(topic_partitions=tuple(
            mod.TopicPartitions(topic_id=topics[t].topic_id, topic_name=t,
                                partitions=tuple(sorted(ps)))
            for t, ps in sorted(a.items()) if t in topics))

    out = []
    # Groups refused DESCRIBE are answered first, as Kafka 4.x adds them before asking its
    # coordinator about the others.
    refused = denied(ctx, Operation.DESCRIBE, ResourceType.GROUP, req.group_ids)
    out += [refusal(mod, gid, ErrorCode.group_authorization_failed)
            for gid in req.group_ids if gid in refused]
    for gid in req.group_ids:
        if gid in refused:
            continue
        err = b.groups.check_status(gid, allow_empty_id=False)
        group = cg.groups.get(gid) if err is None else None
        msg = None
        if err is None and group is None:
            err = ErrorCode.group_id_not_found
            msg = (f"Group {gid} is not a consumer group."
                   if b.groups.group_type(gid) == "classic" else f"Group {gid} not found.")
        if group is None:
            out.append(make(mod.DescribedGroup, error_code=err, error_message=msg, group_id=gid,
                            group_state="", group_epoch=0, assignment_epoch=0,
                            assignor_name="", members=(), authorized_operations=ops))
            continue
        members = tuple(make(
            mod.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_names, subscribed_topic_regex=m.subscribed_regex,
            assignment=assignment(m.assigned),
            target_assignment=assignment(group.target.get(m.member_id, {})), member_type=1)
            for m in group.members.values())
        out.append(make(mod.DescribedGroup, error_code=ErrorCode.none, group_id=gid,
                        group_state=group.state(), group_epoch=group.epoch,
                        assignment_epoch=group.assignment_epoch,
                        assignor_name=group.assignor or cg.assignors[0], members=members,
                        authorized_operations=ops if ops == NO_OPS else
                        authorized_operations(ctx, ResourceType.GROUP, gid)))
    return make(response_class(69, v), throttle_time=ZERO,
                groups=hide_undescribable(ctx, mod, out, lambda m: (
                    m.assignment.topic_partitions + m.target_assignment.topic_partitions)))


def refusal(mod, group_id: str, code: ErrorCode, message: str | None = None):
    """A DescribedGroup (ConsumerGroupDescribe / ShareGroupDescribe) as Kafka 4.x's KafkaApis
    builds a refused one: the id, the error, every other field its default."""
    return make(mod.DescribedGroup, error_code=code, error_message=message, group_id=group_id,
                group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                members=(), authorized_operations=NO_OPS)


UNDESCRIBABLE = "The group has described topic(s) that the client is not authorized to describe."


def hide_undescribable(ctx, mod, groups: list, topic_partitions) -> tuple:
    """The described groups, each one whose members' `topic_partitions(member)` name a topic
    the principal may not DESCRIBE replaced by a TOPIC_AUTHORIZATION_FAILED refusal
    (KafkaApis.handleConsumerGroupDescribe / handleShareGroupDescribe in Kafka 4.x)."""
    names = {tp.topic_name for g in groups for m in g.members for tp in topic_partitions(m)}
    blind = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
    if not blind:
        return tuple(groups)
    return tuple(refusal(mod, g.group_id, ErrorCode.topic_authorization_failed, UNDESCRIBABLE)
                 if any(tp.topic_name in blind for m in g.members
                        for tp in topic_partitions(m)) else g for g in groups)
