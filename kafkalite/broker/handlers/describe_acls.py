# DescribeAcls (key 29), v1-3.
#
# The ACL bindings matching the request's filter (security/acls.py AclFilter: ANY, MATCH,
# null name/principal/host), grouped by resource pattern. A filter with a raw UNKNOWN (0)
# element closes the connection, as Kafka's request validation does; a code Kafka does not
# know matches nothing. Without an authorizer (authorizer.class.name empty) the answer is
# SECURITY_DISABLED; a principal without DESCRIBE on the CLUSTER gets
# CLUSTER_AUTHORIZATION_FAILED. Resources come in the order their first binding was
# created, bindings within one likewise; Kafka's order follows its hash sets.
# In a ZooKeeper cluster the broker's cache of ZooKeeper's ACLs answers (cluster/zk_acls.py):
# eventually consistent, as Kafka's AclAuthorizer.
# Gaps: v0 (removed in Kafka 4.0, KIP-896) is not served.
from __future__ import annotations

from ...security.acl_check import admin_refusal
from ...security.acls import FILTER_CODES, AclFilter, Operation
from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api


@api(29, "DescribeAcls", (1, 3))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(29, v)
    refused = admin_refusal(ctx, Operation.DESCRIBE, (req,), FILTER_CODES)
    if refused is not None:
        code, message = refused
        if code == ErrorCode.security_disabled:
            message = "No Authorizer is configured on the broker"
        return make(response_class(29, v), throttle_time=ZERO, error_code=code,
                    error_message=message, resources=())
    f = AclFilter.of(req.resource_type_filter, req.resource_name_filter,
                     req.pattern_type_filter, req.principal_filter, req.host_filter,
                     req.operation, req.permission_type)
    groups: dict[tuple, list] = {}
    for b in ctx.broker.authorizer.describe(f):
        groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            mod.AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                               permission_type=b.permission))
    resources = tuple(make(mod.DescribeAclsResource, resource_type=rt, resource_name=name,
                           pattern_type=pt, acls=tuple(acls))
                      for (rt, name, pt), acls in groups.items())
    return make(response_class(29, v), throttle_time=ZERO, error_code=ErrorCode.none,
                error_message="", resources=resources)
