# LeaveGroup (key 13), v0-5.
#
# Removes members at once (the group rebalances without waiting for their sessions to
# expire). v0-2 name one member and answer with its error at the top level; v3+ take a batch
# of members, each by member id or, with an empty member id, by group.instance.id (the
# administrative removal of a static member, KIP-345), answered per member. v5 adds a reason,
# only logged. READ on the group, else GROUP_AUTHORIZATION_FAILED for the whole request.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType


@api(13, "LeaveGroup", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    if v >= 3:
        leaving = [(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                   for m in req.members]
    else:
        leaving = [(req.member_id, None, None)]
    cls = response_class(13, v)
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return make(cls, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed,
                    members=())
    err, results = ctx.broker.groups.leave_group(req.group_id, leaving)
    if v < 3:
        if err == ErrorCode.none and results:
            err = results[0]
        return make(cls, throttle_time=ZERO, error_code=err)
    mod = response_module(13, v)
    members = tuple(mod.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
                    for (mid, iid, _), e in zip(leaving, results))
    return make(cls, throttle_time=ZERO, error_code=err, members=members)
