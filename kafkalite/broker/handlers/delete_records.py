# DeleteRecords (key 21), v0-2.
#
# Moves each partition's log start offset (its low watermark) up to the requested offset;
# -1 means the high watermark. Whole segments below it are deleted at once and the new start
# is checkpointed, so it survives restarts; fetches below it get OFFSET_OUT_OF_RANGE. As
# Kafka's Partition.deleteRecordsOnLeader: an offset above the high watermark or negative
# (other than -1) is OFFSET_OUT_OF_RANGE, a topic without the delete cleanup policy
# POLICY_VIOLATION, an unknown partition UNKNOWN_TOPIC_OR_PARTITION; an offset below the
# current start changes nothing. In a cluster only the partition's leader deletes (else
# NOT_LEADER_OR_FOLLOWER, also from a broker keeping an empty placeholder for it). Errors
# carry low_watermark -1. The timeout is ignored: with one replica, the deletion is complete
# when the response is sent, and its checkpoint is on disk (written off the event loop;
# KAFKA_STORAGE_ERROR if that fails).
from __future__ import annotations

from ...cluster.view import NO_EPOCH
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, per_partition, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType
from ._storage import LogError, log_error_code

HIGH_WATERMARK = -1


def _delete(p, offset: int) -> int:
    if p is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition)
    if "delete" not in p.config.cleanup_policy.split(","):
        raise KafkaError(ErrorCode.policy_violation,
                         f"Records of partition {p.topic}-{p.partition} can not be deleted "
                         "due to the configured policy")
    if offset < 0 and offset != HIGH_WATERMARK:
        raise KafkaError(ErrorCode.offset_out_of_range)
    return p.delete_records(offset)


@api(21, "DeleteRecords", (0, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(21, v)
    logs = ctx.broker.logs
    done: dict[tuple[str, int], tuple[int, ErrorCode]] = {}
    refused = denied(ctx, Operation.DELETE, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        for rp in t.partitions:
            if t.name in refused:  # before the topic's existence, as KafkaApis
                done[(t.name, rp.partition_index)] = -1, ErrorCode.topic_authorization_failed
                continue
            code = ctx.broker.view.leader_error(t.name, rp.partition_index, NO_EPOCH)
            if code != ErrorCode.none:  # single node: an unknown partition
                done[(t.name, rp.partition_index)] = -1, ErrorCode(code)
                continue
            where = f"{t.name}-{rp.partition_index}"
            p = logs.partition(t.name, rp.partition_index)
            try:
                low = _delete(p, rp.offset)
                await p.start_offset_durable()
                done[(t.name, rp.partition_index)] = low, ErrorCode.none
            except KafkaError as e:
                done[(t.name, rp.partition_index)] = -1, e.code
            except LogError as e:
                done[(t.name, rp.partition_index)] = -1, log_error_code(e, where)

    def answer(name, rp):
        low, code = done[(name, rp.partition_index)]
        return mod.DeleteRecordsPartitionResult(partition_index=rp.partition_index,
                                                low_watermark=low, error_code=code)

    topics = per_partition(req.topics, "name", answer, lambda name, parts:
                           mod.DeleteRecordsTopicResult(name=name, partitions=parts))
    return make(response_class(21, v), throttle_time=ZERO, topics=topics)
