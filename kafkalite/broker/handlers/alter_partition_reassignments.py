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
# In a ZooKeeper cluster the controller moves the replicas (cluster/reassignment.py), as Kafka
# 3.8's ZooKeeper-mode controller does: the answer comes once the new assignment is written
# (RS, adding, removing in the topic znode), not when the move completes. A broker that is not
# the controller answers NOT_CONTROLLER for the whole request (the client finds the
# controller). Errors per partition: INVALID_REPLICA_ASSIGNMENT (empty, duplicates, negative
# ids, new replicas on brokers not alive), UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS
# (cancelling none), with Kafka's messages; the request's error_message is "" there.
from __future__ import annotations

from ...cluster import zk_admin
from ...cluster.reassignment import alter
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, not_authorized
from ...security.acls import Operation
from .create_topics import validate_replicas

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster
NOT_CONTROLLER = "This is not the correct controller for this cluster."


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
    controller = zk_admin.controller_of(ctx.broker)
    if refusal is None and controller is not None:
        return await _cluster(ctx, req, controller, mod)
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


async def _cluster(ctx, req, controller, mod):
    """The controller's answer (Kafka's ZooKeeper mode); NOT_CONTROLLER elsewhere."""
    v = ctx.api_version
    flag = getattr(req, "allow_replication_factor_change", True)
    wanted = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
              for t in req.topics for p in t.partitions}
    try:
        if not controller.active:
            raise KafkaError(ErrorCode.not_controller, NOT_CONTROLLER)
        results = await zk_admin.on_controller(ctx.broker, lambda: alter(controller, wanted))
    except KafkaError as e:
        return make(response_class(45, v), throttle_time=ZERO,
                    allow_replication_factor_change=flag, error_code=e.code,
                    error_message=e.message if e.code != ErrorCode.not_controller
                    else NOT_CONTROLLER, responses=())
    by_topic: dict[str, list] = {}
    for (topic, i), (code, msg) in results.items():
        by_topic.setdefault(topic, []).append(mod.ReassignablePartitionResponse(
            partition_index=i, error_code=code, error_message=msg))
    return make(response_class(45, v), throttle_time=ZERO,
                allow_replication_factor_change=flag, error_code=ErrorCode.none,
                error_message="", responses=tuple(mod.ReassignableTopicResponse(
                    name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
