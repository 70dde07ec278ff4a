# DescribeGroups (key 15), v0-5.
#
# State, protocol type and members of each group. As Kafka's classic coordinator: a Stable
# group also answers its protocol name and each member's metadata and assignment; in other
# states those are empty; a group this broker does not know is answered as "Dead" with no
# error (v6+ would say GROUP_ID_NOT_FOUND; not served); so is a KIP-848 consumer group, as
# Kafka 4.x (admin clients describe those with ConsumerGroupDescribe), and a KIP-932 share
# group (ShareGroupDescribe).
# Version notes: v3+ authorized operations, computed only when asked (without ACLs: READ,
# DESCRIBE and DELETE, Kafka's bit set for a group) else Int.MIN; v4+ members'
# group.instance.id.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ...coordinator.groups import GroupState
from ..build import ZERO, make, response_module
from ..registry import api

NO_OPS = -2147483648
GROUP_OPS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE (AclOperation codes)


@api(15, "DescribeGroups", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(15, v)
    coord = ctx.broker.groups
    ops = GROUP_OPS if getattr(req, "include_authorized_operations", False) else NO_OPS
    out = []
    for gid in req.groups:
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
                        authorized_operations=ops))
    return make(response_class(15, v), throttle_time=ZERO, groups=tuple(out))
