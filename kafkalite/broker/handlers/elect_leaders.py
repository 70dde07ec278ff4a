# ElectLeaders (key 43), v0-2.
#
# One broker leads every partition and is every partition's preferred (only) replica, so no
# election is ever needed, preferred (0) or unclean (1) alike, as Kafka's
# ReplicationControlManager.electLeaders answers a single-node cluster: a partition named is
# ELECTION_NOT_NEEDED "Leader election not needed for topic partition.", an unknown one
# UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t" / "No such partition as t-9"); null
# topic_partitions (all partitions) lists every topic with no partition results, since
# partitions that need no election are left out there.
#
# In a ZooKeeper cluster the controller elects (cluster/preferred.py), as Kafka 3.8's
# ZooKeeper-mode controller does: PREFERRED moves a partition to its first assigned replica
# when that is live and in sync (PREFERRED_LEADER_NOT_AVAILABLE otherwise), UNCLEAN gives a
# leaderless partition any live replica (ELIGIBLE_LEADERS_NOT_AVAILABLE when none);
# partitions already led as asked answer ELECTION_NOT_NEEDED, and are left out when no
# partition is named. A broker that is not the controller answers NOT_CONTROLLER for each
# partition named (none for all partitions). Elected partitions answer once their state
# znode is written.
from __future__ import annotations

from ...cluster import zk_admin
from ...cluster.preferred import elect_leaders
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, not_authorized
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster

NOT_NEEDED = "Leader election not needed for topic partition."


@api(43, "ElectLeaders", (0, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(43, v)
    logs = ctx.broker.logs
    results = []
    if not cluster(ctx, Operation.ALTER):  # each named partition refused, and the request
        refusal = not_authorized(ctx)
        return make(response_class(43, v), throttle_time=ZERO, error_code=DENIED,
                    replica_election_results=tuple(mod.ReplicaElectionResult(
                        topic=t.topic, partition_result=tuple(mod.PartitionResult(
                            partition_id=i, error_code=DENIED, error_message=refusal)
                            for i in t.partitions)) for t in req.topic_partitions or ()))
    controller = zk_admin.controller_of(ctx.broker)
    if controller is not None:
        return await _cluster(ctx, req, controller, mod)
    if req.topic_partitions is None:
        for name in sorted(logs.topics):
            results.append(mod.ReplicaElectionResult(topic=name, partition_result=()))
    else:
        for t in req.topic_partitions:
            known = logs.get(t.topic) is not None
            parts = []
            for i in t.partitions:
                if not known:
                    code, msg = ErrorCode.unknown_topic_or_partition, f"No such topic as {t.topic}"
                elif logs.partition(t.topic, i) is None:
                    code = ErrorCode.unknown_topic_or_partition
                    msg = f"No such partition as {t.topic}-{i}"
                else:
                    code, msg = ErrorCode.election_not_needed, NOT_NEEDED
                parts.append(mod.PartitionResult(partition_id=i, error_code=code,
                                                 error_message=msg))
            results.append(mod.ReplicaElectionResult(topic=t.topic,
                                                     partition_result=tuple(parts)))
    return make(response_class(43, v), throttle_time=ZERO, error_code=ErrorCode.none,
                replica_election_results=tuple(results))


async def _cluster(ctx, req, controller, mod):
    """The controller's elections (Kafka's ZooKeeper mode); NOT_CONTROLLER elsewhere."""
    named = None if req.topic_partitions is None else [
        (t.topic, i) for t in req.topic_partitions for i in t.partitions]
    election_type = getattr(req, "election_type", 0)  # v0: preferred only
    if not controller.active:
        results = {k: (ErrorCode.not_controller, None) for k in named or ()}
    else:
        try:
            results = await zk_admin.on_controller(ctx.broker, lambda: elect_leaders(
                controller, named, election_type))
        except KafkaError as e:  # deposed meanwhile, or ZooKeeper failed
            results = {k: (e.code, e.message) for k in named or ()}
        if named is None:
            results = {k: r for k, r in results.items()
                       if r[0] != ErrorCode.election_not_needed}
    by_topic: dict[str, list] = {}
    for (topic, i), (code, msg) in results.items():
        by_topic.setdefault(topic, []).append(mod.PartitionResult(
            partition_id=i, error_code=code, error_message=msg))
    return make(response_class(43, ctx.api_version), throttle_time=ZERO,
                error_code=ErrorCode.none, replica_election_results=tuple(
                    mod.ReplicaElectionResult(topic=t, partition_result=tuple(ps))
                    for t, ps in by_topic.items()))
