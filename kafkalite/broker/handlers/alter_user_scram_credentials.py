# AlterUserScramCredentials (key 51), v0.
#
# Upserts and deletes SCRAM-SHA-256 (1) / SCRAM-SHA-512 (2) credentials, checked as Kafka's
# ScramControlManager: empty user UNACCEPTABLE_CREDENTIAL, other mechanisms
# UNSUPPORTED_SASL_MECHANISM, iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL,
# deleting a missing credential RESOURCE_NOT_FOUND, a user altered twice in one request
# DUPLICATE_RESOURCE; an empty salted password fails the whole request with
# UNKNOWN_SERVER_ERROR for every user named, as Kafka's HMAC does. The store keeps salt,
# iterations, StoredKey and ServerKey (security/scram_store.py), persisted under
# .kafkalite/, for SASL/SCRAM to authenticate against. In a ZooKeeper cluster the changes go
# to /config/users/<user> (merged with the user's other keys, then announced, as Kafka's
# ZooKeeper mode) before the answer, and every broker applies them from there
# (cluster/entity_configs.py); a failed ZooKeeper write answers UNKNOWN_SERVER_ERROR.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ...wire.errors import ErrorCode
from ..quotas import commit_plan
from ..registry import api
from ...security.acl_check import cluster, not_authorized
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


@api(51, "AlterUserScramCredentials", (0, 0))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(51, v)
    if not cluster(ctx, Operation.ALTER):  # each user named once, sorted, as Kafka
        users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return make(response_class(51, v), throttle_time=ZERO, results=tuple(
            mod.AlterUserScramCredentialsResult(user=u, error_code=DENIED,
                                                error_message=not_authorized(ctx))
            for u in users))
    results, changes = ctx.broker.scram.plan(
        [(d.name, d.mechanism) for d in req.deletions],
        [(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
         for u in req.upsertions])
    if (e := await commit_plan(ctx.broker, "scram", changes)) is not None:
        results = [(u, e.code if u in changes else code, e.message if u in changes else m)
                   for u, code, m in results]
    return make(response_class(51, v), throttle_time=ZERO, results=tuple(
        mod.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
        for u, code, message in results))
