# DescribeUserScramCredentials (key 50), v0.
#
# Lists each user's SCRAM mechanisms and iteration counts (never salts or keys), as Kafka's
# ScramImage.describe: null or empty users means every user with a credential; an unknown
# user is RESOURCE_NOT_FOUND and a user named twice DUPLICATE_RESOURCE, each with Kafka's
# message; users in Kafka's HashMap order. Successful results carry error_message "", as
# Kafka's do. Gap: a user with both mechanisms lists SHA-256 first; Kafka's order there
# follows enum identity hashes and varies between its runs.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import CLUSTER_AUTHORIZATION_FAILED, cluster
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


@api(50, "DescribeUserScramCredentials", (0, 0))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(50, v)
    if not cluster(ctx, Operation.DESCRIBE):
        return make(response_class(50, v), throttle_time=ZERO, error_code=DENIED,
                    error_message=CLUSTER_AUTHORIZATION_FAILED, results=())
    users = None if req.users is None else [u.name for u in req.users]
    results = tuple(
        mod.DescribeUserScramCredentialsResult(
            user=user, error_code=code, error_message=message,
            credential_infos=tuple(mod.CredentialInfo(mechanism=m, iterations=i)
                                   for m, i in infos))
        for user, code, message, infos in ctx.broker.scram.describe(users))
    return make(response_class(50, v), throttle_time=ZERO, error_code=ErrorCode.none,
                error_message="", results=results)
