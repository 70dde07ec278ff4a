# DescribeCluster (key 60), v0-2.
#
# The brokers and controller of the broker's cluster view, each broker at its endpoint on
# the request's listener (one node, its own controller as a combined KRaft node, without
# ZooKeeper; with zookeeper.connect the live brokers and /controller's broker, -1 while
# there is none). cluster_authorized_operations is Int.MIN unless
# requested; when requested, the operations the ACLs allow on the CLUSTER (0 without
# DESCRIBE on it; without an authorizer every one Kafka supports), as AuthHelper's. endpoint_type
# (v1+) must be 1 (brokers): 2 (controllers) is MISMATCHED_ENDPOINT_TYPE and anything else
# UNSUPPORTED_ENDPOINT_TYPE, both INVALID_REQUEST at v0 (AuthHelper.
# computeDescribeClusterResponse). v2 (Kafka 4.0, KIP-1073) adds is_fenced: never fenced.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster_operations

NO_OPS = -2147483648
BROKERS, CONTROLLERS = 1, 2


@api(60, "DescribeCluster", (0, 2))
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    mod = response_module(60, v)
    cls = response_class(60, v)
    kind = getattr(req, "endpoint_type", BROKERS)
    if kind != BROKERS:
        if kind == CONTROLLERS:
            code = ErrorCode.mismatched_endpoint_type
            msg = ("The request was sent to an endpoint of type BROKER, but we wanted an "
                   "endpoint of type CONTROLLER")
        else:
            code = ErrorCode.unsupported_endpoint_type
            msg = f"Unsupported endpoint type {kind}"
        return make(cls, throttle_time=ZERO, error_code=ErrorCode.invalid_request if v == 0
                    else code, error_message=msg, endpoint_type=BROKERS, cluster_id="",
                    controller_id=-1, brokers=(), cluster_authorized_operations=NO_OPS)
    view = b.view
    brokers = tuple(make(mod.DescribeClusterBroker, broker_id=n.node_id, host=n.host,
                         port=n.port, rack=n.rack, is_fenced=False)
                    for n in view.brokers(ctx.listener))
    ops = cluster_operations(ctx) if req.include_cluster_authorized_operations else NO_OPS
    return make(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                endpoint_type=BROKERS, cluster_id=view.cluster_id,
                controller_id=view.controller_id, brokers=brokers, cluster_authorized_operations=ops)
