# DeleteAcls (key 31), v1-3.
#
# Removes the ACL bindings each filter matches (security/acls.py AclFilter), persisted before
# the answer (acls.json, or ZooKeeper in a cluster: cluster/zk_acls.py); every filter sees the bindings present before the request, so two filters
# matching one binding both list it, as Kafka's controller answers. A filter whose resource
# or pattern type Kafka does not know is INVALID_REQUEST "Unknown patternFilter.", operation
# or permission "Unknown entryFilter."; a raw UNKNOWN (0) code closes the connection.
# Without an authorizer every filter is SECURITY_DISABLED; a principal without ALTER on the
# CLUSTER gets CLUSTER_AUTHORIZATION_FAILED. Matches come in creation order; Kafka's follow
# its hash map of ACL ids.
# Gaps: v0 (removed in Kafka 4.0, KIP-896) is not served.
from __future__ import annotations

from ...security.acl_check import admin_refusal
from ...security.acls import FILTER_CODES, AclFilter, Operation
from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api


@api(31, "DeleteAcls", (1, 3))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(31, v)
    refused = admin_refusal(ctx, Operation.ALTER, req.filters, FILTER_CODES)
    if refused is not None:
        results = [(*refused, [])] * len(req.filters)
    else:
        results = await ctx.broker.authorizer.delete([AclFilter.of(
            f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
            f.principal_filter, f.host_filter, f.operation, f.permission_type)
            for f in req.filters])
    return make(response_class(31, v), throttle_time=ZERO, filter_results=tuple(
        mod.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=tuple(
            make(mod.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                 resource_type=b.resource_type, resource_name=b.name,
                 pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                 operation=b.operation, permission_type=b.permission) for b in matched))
        for code, message, matched in results))
