# DescribeGroups (key 15), v0-5.
#
# State, protocol type and members of each group. As Kafka's classic coordinator: a Stable
# group also answers its protocol name and each member's metadata and assignment; in other
# states those are empty; a group this broker does not know is answered as "Dead" with no
# error (v6+ would say GROUP_ID_NOT_FOUND; not served); so is a KIP-848 consumer group, as
# Kafka 4.x (admin clients describe those with ConsumerGroupDescribe), and a KIP-932 share
# group (ShareGroupDescribe).
# Version notes: v3+ authorized operations, computed only when asked and for groups without
# an error (from the ACLs; without an authorizer READ, DESCRIBE and DELETE, Kafka's bit set
# for a group) else Int.MIN; v4+ members' group.instance.id. A group the principal may not
# DESCRIBE answers GROUP_AUTHORIZATION_FAILED, listed first as Kafka's KafkaApis does.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ...coordinator.groups import GroupState
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import authorized_operations, check
from ...security.acls import Operation, ResourceType

NO_OPS = -2147483648
GROUP_OPS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE (AclOperation codes)


@api(15, "DescribeGroups", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(15, v)
    coord = ctx.broker.groups
    want_ops = getattr(req, "include_authorized_operations", False)
    out, refused = [], []
    for gid in req.groups:
        if not check(ctx, Operation.DESCRIBE, ResourceType.GROUP, gid):
            refused.append(make(mod.DescribedGroup, error_code=ErrorCode.group_authorization_failed,
                                group_id=gid, group_state="", protocol_type="",
                                protocol_data="", members=(), authorized_operations=NO_OPS))
            continue
        err, group = coord.describe_group(gid)
        if gid in coord.consumer_groups or coord.group_type(gid) == "share":
            group = None  # a KIP-848 or share group is Dead to the classic API, as Kafka's
        state, ptype, pdata, members = "Dead", "", "", ()
        if err != ErrorCode.none:
            state = ""
        elif group is not None:
            stable = group.state == GroupState.STABLE
            state = group.state.value
            ptype = group.protocol_type or ""
            pdata = (group.protocol_name or "") if stable else ""
            members = tuple(make(
                mod.DescribedGroupMember, member_id=m.member_id, group_instance_id=m.instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(pdata) if stable else b"",
                member_assignment=m.assignment if stable else b"")
                for m in group.members.values())
        out.append(make(mod.DescribedGroup, error_code=err, group_id=gid, group_state=state,
                        protocol_type=ptype, protocol_data=pdata, members=members,
                        authorized_operations=authorized_operations(ctx, ResourceType.GROUP, gid)
                        if want_ops and err == ErrorCode.none else NO_OPS))
    return make(response_class(15, v), throttle_time=ZERO, groups=tuple(refused + out))
