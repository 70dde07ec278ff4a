# AlterPartitionReassignments (key 45), v0-1.
#
# Each target replica set is checked as Kafka's ReplicationControlManager checks it
# (validateManualPartitionAssignment: INVALID_REPLICA_ASSIGNMENT for an empty list, an
# unregistered broker, a broker named twice); the only valid set on one node is this node,
# which is where the replica already is, so it answers NONE and nothing moves. A null set
# cancels a reassignment: none is ever in progress (NO_REASSIGNMENT_IN_PROGRESS). Unknown
# topics and partitions are UNKNOWN_TOPIC_OR_PARTITION with Kafka's messages. v1 (Kafka 4.0,
# KIP-860) echoes allow_replication_factor_change; a valid set here never changes the
# replication factor, so the flag never refuses anything. An empty topic list answers
# error_message "" where any other answers null, as Kafka 3.8 does.
# Gap: in a ZooKeeper cluster (zookeeper.connect) reassignment is not built: the request is
# refused whole with INVALID_REQUEST and a message saying so, after authorization.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, not_authorized
from ...security.acls import Operation
from ..unsupported import log_refused_feature
from .create_topics import validate_replicas

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster
CLUSTER_REFUSAL = ("Partition reassignment is not supported by a kafkalite cluster yet "
                   "(see COMPATIBILITY.md)")


def _check(broker, topic: str, partition: int, replicas) -> None:
    logs = broker.logs
    if logs.get(topic) is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"Unable to find a topic named {topic}.")
    if logs.partition(topic, partition) is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"Unable to find partition {topic}:{partition}.")
    if replicas is None:
        raise KafkaError(ErrorCode.no_reassignment_in_progress, None)
    validate_replicas(list(replicas), broker.node_id, None)


@api(45, "AlterPartitionReassignments", (0, 1))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(45, v)
    out = []
    refusal = None if cluster(ctx, Operation.ALTER) else not_authorized(ctx)
    if refusal is None and getattr(ctx.broker, "membership", None) is not None:
        # a ZooKeeper cluster: replicas would really have to move, which is not built yet;
        # refused whole rather than answered NONE with nothing moving
        log_refused_feature("partition reassignment in a cluster", "AlterPartitionReassignments")
        return make(response_class(45, v), throttle_time=ZERO,
                    allow_replication_factor_change=getattr(
                        req, "allow_replication_factor_change", True),
                    error_code=ErrorCode.invalid_request, error_message=CLUSTER_REFUSAL,
                    responses=())
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                if refusal is not None:  # every partition and the request refused, as Kafka
                    raise KafkaError(DENIED, refusal)
                _check(ctx.broker, t.name, p.partition_index, p.replicas)
                code, msg = ErrorCode.none, None
            except KafkaError as e:
                code, msg = e.code, e.message
            parts.append(mod.ReassignablePartitionResponse(
                partition_index=p.partition_index, error_code=code, error_message=msg))
        out.append(mod.ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return make(response_class(45, v), throttle_time=ZERO,
                allow_replication_factor_change=getattr(req, "allow_replication_factor_change",
                                                        True),
                error_code=ErrorCode.none if refusal is None else DENIED,
                error_message=refusal if refusal is not None else None if out else "",
                responses=tuple(out))
