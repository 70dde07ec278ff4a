# The enforcement hook that request handlers call: check(ctx, operation, resource type, name).
#
# The principal is the connection's: `ctx.principal` once SASL/mTLS set it, User:ANONYMOUS
# until then (Kafka's principal on PLAINTEXT). The host is the client's address. With no
# authorizer (authorizer.class.name empty) every check passes, as Kafka without one.
#
# What Kafka 3.8 checks per API (KafkaApis / AuthHelper), for the handlers to wire; failures
# are TOPIC_ / GROUP_ / CLUSTER_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED as the resource says:
# | API (key)                          | operation on resource                                     |
# |------------------------------------|-----------------------------------------------------------|
# | Produce (0)                        | WRITE TRANSACTIONAL_ID (transactional), WRITE TOPIC       |
# | Fetch (1)                          | READ TOPIC (consumers); CLUSTER_ACTION CLUSTER (replicas) |
# | ListOffsets (2)                    | DESCRIBE TOPIC                                            |
# | Metadata (3)                       | DESCRIBE TOPIC: named topics TOPIC_AUTHORIZATION_FAILED,  |
# |                                    | all-topics silently leaves them out; auto-creation needs  |
# |                                    | CREATE CLUSTER or CREATE TOPIC                            |
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
# | WriteTxnMarkers (27)               | CLUSTER_ACTION CLUSTER                                    |
# | TxnOffsetCommit (28)               | WRITE TRANSACTIONAL_ID, READ GROUP, READ TOPIC            |
# | DescribeAcls (29)                  | DESCRIBE CLUSTER                                          |
# | CreateAcls (30), DeleteAcls (31)   | ALTER CLUSTER                                             |
# | DescribeConfigs (32)               | DESCRIBE_CONFIGS CLUSTER (broker) / TOPIC                 |
# | AlterConfigs (33), Incremental-    | ALTER_CONFIGS CLUSTER (broker) / TOPIC                    |
# |   AlterConfigs (44)                |                                                           |
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
# | AlterUserScramCredentials (51)     | ALTER CLUSTER                                             |
# | DescribeProducers (61)             | READ TOPIC                                                |
# | DescribeTransactions (65),         | DESCRIBE TRANSACTIONAL_ID (ListTransactions leaves the    |
# |   ListTransactions (66)            | others out)                                               |
# | ConsumerGroupHeartbeat (68)        | READ GROUP; DESCRIBE TOPIC for the subscribed topics      |
# | ConsumerGroupDescribe (69)         | DESCRIBE GROUP                                            |
# | DescribeTopicPartitions (75)       | DESCRIBE TOPIC                                            |
# | Share groups (76-79, 90-92)        | READ GROUP, READ TOPIC; admin: DESCRIBE / DELETE GROUP    |
# | ApiVersions, DescribeCluster, SASL | none (DescribeCluster computes authorized_operations)     |
from __future__ import annotations

from typing import Any, Iterable

from .acls import Authorizer, Operation, ResourceType

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
    auth: Authorizer | None = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return True
    return auth.authorize(principal_of(ctx), host_of(ctx), operation, resource_type, name)


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
    if getattr(ctx.broker, "authorizer", None) is None:
        return ErrorCode.security_disabled, "No Authorizer is configured."
    if not check(ctx, operation, ResourceType.CLUSTER, "kafka-cluster"):
        return (ErrorCode.cluster_authorization_failed,
                f"Request {principal_of(ctx)} is not authorized.")
    return None
