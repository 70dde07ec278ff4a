# DescribeProducers (key 61), v0 (KIP-664).
#
# Lists the idempotent producers each partition remembers (its producer state: id, epoch,
# last sequence, and last_timestamp, the max timestamp of the producer's last batch, by which
# it expires after producer.id.expiration.ms), coordinator_epoch (of its last transaction
# marker here, -1 before any) and current_txn_start_offset (the first offset of its open
# transaction in the partition, -1 for none). As Kafka's KafkaApis: an illegal
# topic name is INVALID_TOPIC_EXCEPTION and an unknown topic or partition
# UNKNOWN_TOPIC_OR_PARTITION, for each partition asked. In a cluster a partition the cluster
# knows but this broker holds no replica of is NOT_LEADER_OR_FOLLOWER (Kafka's
# ReplicaManager.getPartitionOrError); followers answer from their own producer state.
from __future__ import annotations

from ...log.manager import validate_topic_name
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType

NO_TOPIC = "This server does not host this topic-partition."
REFUSED = "Topic authorization failed."


def _producers(mod, broker, p) -> tuple:
    state = broker.producer_state(p)
    return tuple(mod.ProducerState(producer_id=pid, producer_epoch=entry.epoch,
                                   last_sequence=entry.last_seq,
                                   last_timestamp=entry.timestamp,
                                   coordinator_epoch=entry.coordinator_epoch,
                                   current_txn_start_offset=state.ongoing.get(pid, -1))
                 for pid, entry in sorted(state.producers.items()))


def _not_here(b, name: str, idx: int) -> KafkaError | None:
    """NOT_LEADER_OR_FOLLOWER for a partition assigned elsewhere (the view's replicas), even
    when the log manager keeps an empty placeholder for it here."""
    ps = b.view.partition(name, idx)
    if ps is not None and b.node_id not in ps.replicas:
        return KafkaError(ErrorCode.not_leader_or_follower)
    return None


@api(61, "DescribeProducers", (0, 0))
async def handle(ctx, req):
    b = ctx.broker
    mod = response_module(61, ctx.api_version)
    topics = []
    for t in req.topics:
        topic_error = None
        try:
            validate_topic_name(t.name)
            if not check(ctx, Operation.READ, ResourceType.TOPIC, t.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, REFUSED)
            if b.logs.get(t.name) is None and b.view.topic(t.name) is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, NO_TOPIC)
        except KafkaError as e:
            topic_error = e
        parts = []
        for idx in t.partition_indexes:
            err = topic_error or _not_here(b, t.name, idx)
            p = None if err else b.logs.partition(t.name, idx)
            err = err or (None if p is not None else
                          KafkaError(ErrorCode.unknown_topic_or_partition, NO_TOPIC))
            parts.append(mod.PartitionResponse(
                partition_index=idx, error_code=err.code if err else ErrorCode.none,
                # Kafka sends the code alone, but for its refusal's ApiError message
                error_message=err.message if err is not None and err.message == REFUSED
                else None,
                active_producers=_producers(mod, b, p) if p is not None else ()))
        topics.append(mod.TopicResponse(name=t.name, partitions=tuple(parts)))
    return make(response_class(61, ctx.api_version), throttle_time=ZERO, topics=tuple(topics))
