# ListPartitionReassignments (key 46), v0.
#
# A single replica never moves, so no reassignment is ever in progress: every request, for
# all topics (null) or named ones, known or not, answers NONE with no topics, as Kafka does
# when none is ongoing.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make
from ..registry import api
from ...security.acl_check import cluster, not_authorized
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


@api(46, "ListPartitionReassignments", (0, 0))
async def handle(ctx, req):
    if not cluster(ctx, Operation.DESCRIBE):
        return make(response_class(46, ctx.api_version), throttle_time=ZERO,
                    error_code=DENIED, error_message=not_authorized(ctx),
                    topics=())
    return make(response_class(46, ctx.api_version), throttle_time=ZERO,
                error_code=ErrorCode.none, error_message=None, topics=())
