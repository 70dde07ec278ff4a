# CreateAcls (key 30), v1-3.
#
# Adds ACL bindings to the authorizer (security/acls.py), persisted before the answer (in
# .kafkalite/acls.json, or in ZooKeeper in a cluster: cluster/zk_acls.py). Checks
# as Kafka 3.8: ANY or MATCH anywhere fails every creation with UNKNOWN_SERVER_ERROR and
# creates none; a CLUSTER resource not named kafka-cluster, an empty name, and codes Kafka
# does not know are INVALID_REQUEST for that creation only; a binding already present
# succeeds. A raw UNKNOWN (0) code closes the connection. Principals and hosts are taken as
# given (Kafka 3.8 does not check them). Without an authorizer every creation is
# SECURITY_DISABLED; a principal without ALTER on the CLUSTER gets
# CLUSTER_AUTHORIZATION_FAILED.
# Gaps: v0 (removed in Kafka 4.0, KIP-896) is not served.
from __future__ import annotations

from ...security.acl_check import admin_refusal
from ...security.acls import CREATION_CODES, AclBinding, Operation
from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ..registry import api


@api(30, "CreateAcls", (1, 3))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(30, v)
    refused = admin_refusal(ctx, Operation.ALTER, req.creations, CREATION_CODES)
    if refused is not None:
        results = [refused] * len(req.creations)
    else:
        results = await ctx.broker.authorizer.create([AclBinding.of(
            c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
            c.operation, c.permission_type) for c in req.creations])
    return make(response_class(30, v), throttle_time=ZERO, results=tuple(
        mod.AclCreationResult(error_code=code, error_message=message)
        for code, message in results))
