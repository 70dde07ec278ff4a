# AddPartitionsToTxn (key 24), v0-5.
#
# Adds partitions to the producer's transaction (Empty/Complete -> Ongoing, written to
# __transaction_state before the answer). As Kafka's KafkaApis: a partition that does not
# exist is UNKNOWN_TOPIC_OR_PARTITION and then every other one OPERATION_NOT_ATTEMPTED, with
# nothing added; otherwise every partition gets the coordinator's one error.
# Version notes: v0-3 carry one transaction and answer results_by_topic_v3_and_below; v4+
# (KIP-890, meant for brokers) batch transactions and may be verify_only: the partitions are
# checked against the ongoing transaction, nothing is added (TRANSACTION_ABORTABLE for a
# partition not in it, as Kafka 3.8). Kafka without an authorizer answers a client's v4+ the
# same way, so kafkalite does too. Before v2, PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, response_module
from ..registry import api


def _exists(broker, topic: str, partition: int) -> bool:
    t = broker.logs.get(topic)
    return t is not None and 0 <= partition < len(t.partitions)


async def _answer(ctx, txn_id, pid, epoch, topics, verify_only: bool) -> dict:
    """{(topic, partition): error} for one transaction."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    missing = {tp for tp in wanted if not _exists(ctx.broker, *tp)}
    if missing:
        return {tp: E.unknown_topic_or_partition if tp in missing else E.operation_not_attempted
                for tp in wanted}
    coord = ctx.broker.transactions
    if verify_only:
        return coord.verify(txn_id, pid, epoch, wanted)
    err = await coord.add_partitions(txn_id, pid, epoch, wanted)
    if err == E.producer_fenced and ctx.api_version < 2:
        err = E.invalid_producer_epoch
    return {tp: err for tp in wanted}


def _topic_results(mod, errors: dict) -> tuple:
    by_topic: dict[str, list] = {}
    for (topic, partition), err in errors.items():
        by_topic.setdefault(topic, []).append(mod.AddPartitionsToTxnPartitionResult(
            partition_index=partition, partition_error_code=err))
    return tuple(mod.AddPartitionsToTxnTopicResult(name=t, results_by_partition=tuple(r))
                 for t, r in by_topic.items())


@api(24, "AddPartitionsToTxn", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(24, v)
    cls = response_class(24, v)
    if v < 4:
        errors = await _answer(ctx, req.v3_and_below_transactional_id,
                               req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                               req.v3_and_below_topics, False)
        return make(cls, throttle_time=ZERO, results_by_topic_v3_and_below=_topic_results(
            mod, errors))
    results = []
    for txn in req.transactions:
        errors = await _answer(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                               txn.topics, txn.verify_only)
        results.append(mod.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                    topic_results=_topic_results(mod, errors)))
    return make(cls, throttle_time=ZERO, error_code=E.none, results_by_transaction=tuple(results))
