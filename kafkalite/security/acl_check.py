# The enforcement hook that request handlers call: check(ctx, operation, resource type, name).
#
# The principal is the connection's: `ctx.principal` once SASL/mTLS set it, User:ANONYMOUS
# until then (Kafka's principal on PLAINTEXT). The host is the client's address. With no
# authorizer (authorizer.class.name empty) every check passes, as Kafka without one.
#
# What Kafka 3.8 checks per API (KafkaApis / AuthHelper; "4.x": Kafka 4.x's KafkaApis and
# GroupMetadataManager for the APIs 3.8 does not serve), for the handlers to wire; failures
# are TOPIC_ / GROUP_ / CLUSTER_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED as the resource says:
# | API (key)                          | operation on resource                                     |
# |------------------------------------|-----------------------------------------------------------|
# | Produce (0)                        | WRITE TRANSACTIONAL_ID (transactional), WRITE TOPIC       |
# | Fetch (1)                          | READ TOPIC (consumers); CLUSTER_ACTION CLUSTER (replicas) |
# | ListOffsets (2)                    | DESCRIBE TOPIC                                            |
# | Metadata (3)                       | DESCRIBE TOPIC: named topics TOPIC_AUTHORIZATION_FAILED,  |
# |                                    | all-topics silently leaves them out; auto-creation needs  |
# |                                    | CREATE CLUSTER or CREATE TOPIC                            |
# | ControlledShutdown (7)             | CLUSTER_ACTION CLUSTER (ZooKeeper cluster only)           |
# | OffsetCommit (8)                   | READ GROUP, READ TOPIC                                    |
# | OffsetFetch (9)                    | DESCRIBE GROUP, DESCRIBE TOPIC (partitions left out)      |
# | FindCoordinator (10)               | DESCRIBE GROUP / DESCRIBE TRANSACTIONAL_ID                |
# | JoinGroup, Heartbeat, LeaveGroup,  | READ GROUP                                                |
# |   SyncGroup (11-14)                |                                                           |
# | DescribeGroups (15)                | DESCRIBE GROUP                                            |
# | ListGroups (16)                    | DESCRIBE CLUSTER, else only groups with DESCRIBE GROUP    |
# | CreateTopics (19)                  | CREATE CLUSTER or CREATE TOPIC; DESCRIBE_CONFIGS TOPIC    |
# |                                    | for the configs in the answer                             |
# | DeleteTopics (20), DeleteRecords   | DELETE TOPIC (DESCRIBE TOPIC decides UNKNOWN_TOPIC vs     |
# |   (21)                             | TOPIC_AUTHORIZATION_FAILED)                               |
# | InitProducerId (22)                | WRITE TRANSACTIONAL_ID; without one IDEMPOTENT_WRITE      |
# |                                    | CLUSTER or WRITE on any topic                             |
# | OffsetForLeaderEpoch (23)          | DESCRIBE TOPIC; CLUSTER_ACTION CLUSTER (replicas)         |
# | AddPartitionsToTxn (24)            | WRITE TRANSACTIONAL_ID, WRITE TOPIC; v4+ batches from     |
# |                                    | brokers CLUSTER_ACTION CLUSTER                            |
# | AddOffsetsToTxn (25)               | WRITE TRANSACTIONAL_ID, READ GROUP                        |
# | EndTxn (26)                        | WRITE TRANSACTIONAL_ID                                    |
# | WriteTxnMarkers (27)               | ALTER CLUSTER, else CLUSTER_ACTION CLUSTER                |
# | TxnOffsetCommit (28)               | WRITE TRANSACTIONAL_ID, READ GROUP, READ TOPIC            |
# | DescribeAcls (29)                  | DESCRIBE CLUSTER                                          |
# | CreateAcls (30), DeleteAcls (31)   | ALTER CLUSTER                                             |
# | DescribeConfigs (32)               | DESCRIBE_CONFIGS CLUSTER (broker, broker logger) / TOPIC  |
# |                                    | / GROUP (group configs); refused resources answered last  |
# | AlterConfigs (33), Incremental-    | ALTER_CONFIGS CLUSTER (broker, broker logger) / TOPIC /   |
# |   AlterConfigs (44)                | GROUP                                                     |
# | AlterReplicaLogDirs (34)           | ALTER CLUSTER                                             |
# | DescribeLogDirs (35)               | DESCRIBE CLUSTER                                          |
# | CreatePartitions (37)              | ALTER TOPIC                                               |
# | Delegation tokens (38-41)          | CREATE_TOKENS / DESCRIBE_TOKENS USER, DESCRIBE            |
# |                                    | DELEGATION_TOKEN                                          |
# | DeleteGroups (42)                  | DELETE GROUP                                              |
# | ElectLeaders (43), AlterPartition- | ALTER CLUSTER                                             |
# |   Reassignments (45)               |                                                           |
# | ListPartitionReassignments (46)    | DESCRIBE CLUSTER                                          |
# | OffsetDelete (47)                  | DELETE GROUP, READ TOPIC                                  |
# | DescribeClientQuotas (48)          | DESCRIBE_CONFIGS CLUSTER                                  |
# | AlterClientQuotas (49)             | ALTER_CONFIGS CLUSTER                                     |
# | DescribeUserScramCredentials (50)  | DESCRIBE CLUSTER                                          |
# | DescribeQuorum (55)                | DESCRIBE CLUSTER                                          |
# | AlterUserScramCredentials (51)     | ALTER CLUSTER                                             |
# | DescribeProducers (61)             | READ TOPIC                                                |
# | DescribeTransactions (65),         | DESCRIBE TRANSACTIONAL_ID (ListTransactions leaves the    |
# |   ListTransactions (66)            | others out)                                               |
# | ConsumerGroupHeartbeat (68)        | READ GROUP; DESCRIBE TOPIC for the subscribed names; a    |
# |                                    | regex resolves to the DESCRIBE-able topics only (4.x)     |
# | ConsumerGroupDescribe (69),        | DESCRIBE GROUP; DESCRIBE TOPIC on the members' assigned   |
# |   ShareGroupDescribe (77)          | topics, else the group is TOPIC_AUTHORIZATION_FAILED (4.x)|
# | DescribeTopicPartitions (75)       | DESCRIBE TOPIC                                            |
# | ShareGroupHeartbeat (76)           | READ GROUP; DESCRIBE TOPIC for the subscribed names       |
# | ShareFetch (78), ShareAcknowledge  | READ GROUP; READ TOPIC per partition (request + session)  |
# |   (79)                             |                                                           |
# | DescribeShareGroupOffsets (90)     | DESCRIBE GROUP; DESCRIBE TOPIC                            |
# | AlterShareGroupOffsets (91)        | READ GROUP; READ TOPIC                                    |
# | DeleteShareGroupOffsets (92)       | DELETE GROUP; READ TOPIC                                  |
# | ApiVersions, DescribeCluster, SASL | none (DescribeCluster computes authorized_operations)     |
from __future__ import annotations

from typing import Any, Iterable

from .acls import (CLUSTER_NAME, WILDCARD, WILDCARD_PRINCIPAL, Authorizer, Operation,
                   PatternType, Permission, ResourceType)

ANONYMOUS = "User:ANONYMOUS"


def open_authorizer(config: Any, state_dir: str) -> Authorizer | None:
    """The broker's authorizer as its config asks, ACLs loaded; None when none is set."""
    if not config["authorizer.class.name"]:
        return None
    auth = Authorizer(state_dir, config["super.users"] or "",
                      config["allow.everyone.if.no.acl.found"])
    auth.load()
    return auth


def principal_of(ctx: Any) -> str:
    return getattr(ctx, "principal", None) or ANONYMOUS


def host_of(ctx: Any) -> str:
    peer = getattr(ctx, "peer", "") or ""
    return peer.rsplit(":", 1)[0] if ":" in peer else peer


def check(ctx: Any, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    """May the request's principal, from its host, do `operation` on the resource?"""
    auth: Authorizer | None = ctx.broker.authorizer
    if auth is None:
        return True
    return auth.authorize(principal_of(ctx), host_of(ctx), operation, resource_type, name)


def denied(ctx: Any, operation: Operation, resource_type: ResourceType,
           names: Iterable[str]) -> set[str]:
    """The names among `names` the principal may not do `operation` on (Kafka's
    filterByAuthorized, inverted): empty, at once, without an authorizer."""
    auth: Authorizer | None = ctx.broker.authorizer
    if auth is None:
        return set()
    principal, host = principal_of(ctx), host_of(ctx)
    return {n for n in set(names)
            if not auth.authorize(principal, host, operation, resource_type, n)}


def cluster(ctx: Any, operation: Operation) -> bool:
    return check(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


# AclEntry.supportedOperations: what authorized_operations lists per resource type.
SUPPORTED_OPS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                         Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                           Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}


def authorized_operations(ctx: Any, resource_type: ResourceType,
                          name: str = CLUSTER_NAME) -> int:
    """The bit field of the supported operations the principal may do on the resource
    (AuthHelper.authorizedOperations): all of them without an authorizer."""
    return sum(1 << op for op in SUPPORTED_OPS[resource_type]
               if check(ctx, op, resource_type, name))


def cluster_operations(ctx: Any) -> int:
    """cluster_authorized_operations as Metadata v8-10 and DescribeCluster answer it when
    asked: 0 without DESCRIBE on the cluster, else the authorized operations."""
    return authorized_operations(ctx, ResourceType.CLUSTER) \
        if cluster(ctx, Operation.DESCRIBE) else 0


def by_resource_type(ctx: Any, operation: Operation, resource_type: ResourceType) -> bool:
    """Kafka's Authorizer.authorizeByResourceType (InitProducerId of an idempotent producer:
    WRITE on any topic): allowed on a resource named "hardcode" (super users, or
    allow.everyone.if.no.acl.found), or some ALLOW of the principal not dominated by a DENY
    (the same LITERAL name, a PREFIXED prefix of it, or LITERAL "*")."""
    auth: Authorizer | None = ctx.broker.authorizer
    if auth is None or auth.authorize(principal_of(ctx), host_of(ctx), operation,
                                      resource_type, "hardcode"):
        return True
    principal, host = principal_of(ctx), host_of(ctx)
    deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allow: list[tuple[PatternType, str]] = []
    for b in auth.acls:
        if (b.resource_type != resource_type or b.host not in (host, WILDCARD)
                or b.principal not in (principal, WILDCARD_PRINCIPAL)
                or b.operation not in (operation, Operation.ALL)):
            continue
        if b.permission == Permission.DENY:
            if b.pattern_type == PatternType.LITERAL and b.name == WILDCARD:
                return False
            deny[b.pattern_type].add(b.name)
        elif b.pattern_type == PatternType.LITERAL and b.name == WILDCARD:
            return True
        else:
            allow.append((b.pattern_type, b.name))
    for ptype, name in allow:
        if ptype == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
            continue
        if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
            return True
    return False


def admin_refusal(ctx: Any, operation: Operation, items: Iterable[Any],
                  fields: tuple[str, ...]) -> tuple[int, str] | None:
    """Why an ACL admin request (DescribeAcls: DESCRIBE, Create/DeleteAcls: ALTER on the
    CLUSTER) is refused as a whole, as AclApis: SECURITY_DISABLED without an authorizer,
    CLUSTER_AUTHORIZATION_FAILED for a principal not allowed; None when it may proceed.
    A raw UNKNOWN (0) in the `fields` of any creation or filter closes the connection
    (MalformedRequest), as Kafka's request parsing refuses it first."""
    from ..wire.errors import ErrorCode, MalformedRequest
    if any(getattr(item, name) == 0 for item in items for name in fields):
        raise MalformedRequest(f"API key {ctx.api_key}: an UNKNOWN (0) resource type, "
                               "pattern type, operation or permission")
    if ctx.broker.authorizer is None:
        return ErrorCode.security_disabled, "No Authorizer is configured."
    if not cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed, not_authorized(ctx)
    return None


def not_authorized(ctx: Any) -> str:
    """The message of the ClusterAuthorizationException Kafka's authorizeClusterOperation
    throws ("Request <its Request's toString> is not authorized."), the principal standing in
    for Kafka's connection details."""
    return f"Request {principal_of(ctx)} is not authorized."


CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."  # the error's own message


# Config resources (DescribeConfigs / AlterConfigs / IncrementalAlterConfigs resource_type):
# TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, and what each is authorized against.
_CONFIG_RESOURCES = {2: ResourceType.TOPIC, 4: ResourceType.CLUSTER, 8: ResourceType.CLUSTER,
                     16: ResourceType.CLUSTER, 32: ResourceType.GROUP}


def config_refusal(ctx: Any, operation: Operation, config_type: int,
                   name: str) -> tuple[int, str | None] | None:
    """(error code, message) refusing `operation` (DESCRIBE_CONFIGS / ALTER_CONFIGS) on one
    config resource, as KafkaApis / ControllerApis.authorizeAlterResource: on the TOPIC, on
    the CLUSTER for BROKER, BROKER_LOGGER and CLIENT_METRICS, on the GROUP for group configs
    (Kafka 4.x); the message is the error's own (ApiError(error)). None when allowed or the
    type is not one of these (the handler refuses it for its own reason)."""
    from ..wire.errors import ErrorCode
    rtype = _CONFIG_RESOURCES.get(config_type)
    if rtype is None:
        return None
    if rtype == ResourceType.CLUSTER:
        name = CLUSTER_NAME
    if check(ctx, operation, rtype, name):
        return None
    return {ResourceType.TOPIC: (ErrorCode.topic_authorization_failed,
                                 "Topic authorization failed."),
            ResourceType.CLUSTER: (ErrorCode.cluster_authorization_failed,
                                   CLUSTER_AUTHORIZATION_FAILED),
            ResourceType.GROUP: (ErrorCode.group_authorization_failed,
                                 "Group authorization failed.")}[rtype]
