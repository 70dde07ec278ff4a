# OffsetForLeaderEpoch (key 23), v2-4 (Kafka 4.0 dropped v0-1).
#
# Consumers (KIP-320) and followers ask where a leader epoch ends: the partition's leader-epoch
# cache answers (log/leader_epoch.py, Kafka's LeaderEpochFileCache.endOffsetFor). On one node
# its only entry is epoch 0 from the log start: epoch 0 ends at the log end offset; a
# requested epoch above 0 is unknown, answered with epoch and offset -1 (UNDEFINED) and no
# error; -1 gives -1/-1 too; an epoch below -1 (before the first entry) answers that epoch
# ending at the log start offset. current_leader_epoch, when not -1, is
# checked as Fetch does against the cluster view's epoch (one node: 0): newer
# UNKNOWN_LEADER_EPOCH, older (or below -1) FENCED_LEADER_EPOCH; in a cluster a partition this
# broker does not lead is NOT_LEADER_OR_FOLLOWER. An unknown partition is
# UNKNOWN_TOPIC_OR_PARTITION. replica_id (v3+) changes nothing here.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, per_partition, response_module
from ..registry import api
from ...security.acl_check import cluster, denied
from ...security.acls import Operation, ResourceType

UNDEFINED = -1


def end_offset(view, name: str, index: int, p, current_epoch: int, epoch: int
               ) -> tuple[int, int]:
    """(leader epoch, end offset) for one partition."""
    code = view.leader_error(name, index, max(current_epoch, UNDEFINED))
    if code == ErrorCode.none and current_epoch < UNDEFINED:
        code = ErrorCode.fenced_leader_epoch  # below any epoch (Partition.checkCurrentLeaderEpoch)
    if code or p is None:
        raise KafkaError(code or ErrorCode.unknown_topic_or_partition)
    return p.epochs.end_offset_for(epoch, p.log_end_offset)


@api(23, "OffsetForLeaderEpoch", (2, 4))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(23, v)
    logs = ctx.broker.logs
    view = ctx.broker.view

    def answer(name, rp):
        try:
            epoch, offset = end_offset(view, name, rp.partition,
                                       logs.partition(name, rp.partition),
                                       rp.current_leader_epoch, rp.leader_epoch)
            code = ErrorCode.none
        except KafkaError as e:
            epoch, offset, code = UNDEFINED, UNDEFINED, e.code
        return mod.EpochEndOffset(error_code=code, partition=rp.partition,
                                  leader_epoch=epoch, end_offset=offset)

    # CLUSTER_ACTION (replicas) or DESCRIBE on each topic (consumers, KIP-320); refused topics
    # are answered after the others, as KafkaApis does.
    refused = set() if cluster(ctx, Operation.CLUSTER_ACTION) else \
        denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics))
    topics = per_partition([t for t in req.topics if t.topic not in refused], "topic", answer,
                           lambda name, parts: mod.OffsetForLeaderTopicResult(
                               topic=name, partitions=parts))
    topics += tuple(mod.OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(
        mod.EpochEndOffset(error_code=ErrorCode.topic_authorization_failed,
                           partition=rp.partition, leader_epoch=UNDEFINED, end_offset=UNDEFINED)
        for rp in t.partitions)) for t in req.topics if t.topic in refused)
    return make(response_class(23, v), throttle_time=ZERO, topics=topics)
