# WriteTxnMarkers (key 27), v1-1.
#
# Kafka's coordinators send it to partition leaders; clients send it too: the admin client's
# abortTransaction (`kafka-transactions.sh abort`, `kafkalite transactions abort`) writes an
# ABORT marker for a hanging transaction straight into the partition, with the producer
# id/epoch and coordinator epoch DescribeProducers showed. Each marker goes through the same
# path as the coordinator's own (txn_markers.write_markers): a COMMIT/ABORT control batch
# appended as an acks=all Produce (in a ZooKeeper cluster answered once the ISR has it:
# NOT_ENOUGH_REPLICAS below min.insync.replicas, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
# REQUEST_TIMED_OUT, as Kafka's requiredAcks=-1 append), the producer's open transaction there
# ended (the LSO moves, an ABORT gets its `.txnindex` entry), pending transactional offsets of
# `__consumer_offsets` made visible or dropped once replicated. The coordinator is not told, as in Kafka: if
# it still holds the transaction, its own marker later finds nothing open and changes nothing.
# Errors per partition as Kafka 3.8's KafkaApis/ProducerAppendInfo: UNKNOWN_TOPIC_OR_PARTITION,
# INVALID_PRODUCER_EPOCH for an epoch older than the producer's in the partition,
# TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than its last marker's,
# KAFKA_STORAGE_ERROR when the log fails. Results are grouped by producer id as Kafka's (two
# markers of one producer share one result).
# Versions: v0 (removed by Kafka 4.0, KIP-896; every admin client since Kafka 2.8 sends v1)
# is not served, and kio has no schema for it; v2 (Kafka 4.1, a TransactionVersion per
# marker for KIP-890 part 2's strict epoch check) is not served, as transaction version 2 is
# not (COMPATIBILITY.md, Transactions). No authorizer: Kafka's CLUSTER_ACTION check passes.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import response_module
from ..registry import api
from ...security.acl_check import cluster
from ...security.acls import Operation
from ..txn_markers import write_markers


@api(27, "WriteTxnMarkers", (1, 1))
async def handle(ctx, req):
    mod = response_module(27, ctx.api_version)
    # producer id -> topic -> partition -> error, in the order first named
    results: dict[int, dict[str, dict[int, int]]] = {}
    # ALTER on the cluster, else CLUSTER_ACTION (brokers), as Kafka 3.8: else every partition
    # fails
    allowed = cluster(ctx, Operation.ALTER) or cluster(ctx, Operation.CLUSTER_ACTION)
    for marker in req.markers:
        partitions = [(t.name, idx) for t in marker.topics for idx in t.partition_indexes]
        if not allowed:
            errors = {tp: ErrorCode.cluster_authorization_failed for tp in partitions}
        else:
            errors = await write_markers(ctx.broker, marker.producer_id, marker.producer_epoch,
                                         marker.coordinator_epoch, marker.transaction_result,
                                         partitions)
        by_topic = results.setdefault(marker.producer_id, {})
        for (topic, idx), err in errors.items():
            by_topic.setdefault(topic, {})[idx] = err
    return response_class(27, ctx.api_version)(markers=tuple(
        mod.WritableTxnMarkerResult(producer_id=pid, topics=tuple(
            mod.WritableTxnMarkerTopicResult(name=topic, partitions=tuple(
                mod.WritableTxnMarkerPartitionResult(partition_index=idx, error_code=err)
                for idx, err in parts.items()))
            for topic, parts in by_topic.items()))
        for pid, by_topic in results.items()))
