# ListPartitionReassignments (key 46), v0.
#
# A single replica never moves, so no reassignment is ever in progress: every request, for
# all topics (null) or named ones, known or not, answers NONE with no topics, as Kafka does
# when none is ongoing.
#
# In a ZooKeeper cluster the controller lists the reassignments in progress, as the topic
# znodes hold them (cluster/reassignment.py): each partition's replicas (the target first,
# then the replicas leaving), adding_replicas and removing_replicas; named partitions that
# are unknown or not moving are left out. A broker that is not the controller answers
# NOT_CONTROLLER, as Kafka 3.8's ZooKeeper-mode brokers do.
from __future__ import annotations

from ...cluster import zk_admin
from ...cluster.reassignment import ongoing
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, not_authorized
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster
NOT_CONTROLLER = "This is not the correct controller for this cluster."


@api(46, "ListPartitionReassignments", (0, 0))
async def handle(ctx, req):
    if not cluster(ctx, Operation.DESCRIBE):
        return make(response_class(46, ctx.api_version), throttle_time=ZERO,
                    error_code=DENIED, error_message=not_authorized(ctx),
                    topics=())
    controller = zk_admin.controller_of(ctx.broker)
    if controller is not None:
        return await _cluster(ctx, req, controller)
    return make(response_class(46, ctx.api_version), throttle_time=ZERO,
                error_code=ErrorCode.none, error_message=None, topics=())


async def _cluster(ctx, req, controller):
    v = ctx.api_version
    mod = response_module(46, v)
    keys = None if req.topics is None else [
        (t.name, i) for t in req.topics for i in t.partition_indexes]

    async def listed():
        return ongoing(controller, keys)
    try:
        if not controller.active:
            raise KafkaError(ErrorCode.not_controller, NOT_CONTROLLER)
        found = await zk_admin.on_controller(ctx.broker, listed)
    except KafkaError as e:
        return make(response_class(46, v), throttle_time=ZERO, error_code=e.code,
                    error_message=e.message if e.code != ErrorCode.not_controller
                    else NOT_CONTROLLER, topics=())
    by_topic: dict[str, list] = {}
    for (topic, i), a in sorted(found.items()):
        by_topic.setdefault(topic, []).append(mod.OngoingPartitionReassignment(
            partition_index=i, replicas=a.replicas, adding_replicas=a.adding,
            removing_replicas=a.removing))
    return make(response_class(46, v), throttle_time=ZERO, error_code=ErrorCode.none,
                error_message=None, topics=tuple(mod.OngoingTopicReassignment(
                    name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
