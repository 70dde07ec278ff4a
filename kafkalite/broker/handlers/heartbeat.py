# Heartbeat (key 12), v0-4.
#
# Keeps a member's session alive. REBALANCE_IN_PROGRESS tells a member to rejoin,
# ILLEGAL_GENERATION that its generation is over, UNKNOWN_MEMBER_ID that it was removed,
# FENCED_INSTANCE_ID that another process took its group.instance.id (v3+). While the
# coordinator is loading, heartbeats are answered NONE, as Kafka does. READ on the group,
# else GROUP_AUTHORIZATION_FAILED.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make
from ..registry import api
from ...wire.errors import ErrorCode
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType


@api(12, "Heartbeat", (0, 4))
async def handle(ctx, req):
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        err = ErrorCode.group_authorization_failed
    else:
        err = ctx.broker.groups.heartbeat(req.group_id, req.member_id,
                                          getattr(req, "group_instance_id", None),
                                          req.generation_id)
    return make(response_class(12, ctx.api_version), throttle_time=ZERO, error_code=err)
