# AddPartitionsToTxn (key 24), v0-5.
#
# Adds partitions to the producer's transaction (Empty/Complete -> Ongoing, written to
# __transaction_state before the answer). As Kafka's KafkaApis: a partition that does not
# exist is UNKNOWN_TOPIC_OR_PARTITION and then every other one OPERATION_NOT_ATTEMPTED, with
# nothing added; otherwise every partition gets the coordinator's one error.
# Version notes: v0-3 carry one transaction and answer results_by_topic_v3_and_below; v4+
# (KIP-890, meant for brokers) batch transactions and may be verify_only: the partitions are
# checked against the ongoing transaction, nothing is added (TRANSACTION_ABORTABLE for a
# partition not in it, as Kafka 3.8; kafkalite's partition leaders send it, cluster/
# txn_verifier.py). Kafka without an authorizer answers a client's v4+ the
# same way, so kafkalite does too. Before v2, PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
# Authorization as KafkaApis: v0-3 WRITE on the transactional id (every partition
# TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED, also
# for the internal topics; the others OPERATION_NOT_ATTEMPTED); v4+ CLUSTER_ACTION on the
# cluster, else CLUSTER_AUTHORIZATION_FAILED for the whole request.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check, cluster, denied
from ...security.acls import Operation, ResourceType

INTERNAL = frozenset({"__consumer_offsets", "__transaction_state"})


def _exists(broker, topic: str, partition: int) -> bool:
    # the cluster's metadata, as Kafka's metadata cache: a partition led by another broker
    # is in the transaction too (its marker is sent there)
    return broker.view.partition(topic, partition) is not None


async def _answer(ctx, txn_id, pid, epoch, topics, verify_only: bool) -> dict:
    """{(topic, partition): error} for one transaction."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    refused: set[str] = set()
    if ctx.api_version < 4:  # from clients: WRITE on the id and on each (non-internal) topic
        if not check(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return dict.fromkeys(wanted, E.transactional_id_authorization_failed)
        names = {t.name for t in topics}
        refused = (names & INTERNAL) | denied(ctx, Operation.WRITE, ResourceType.TOPIC,
                                              names - INTERNAL)
    missing = {tp for tp in wanted if tp[0] not in refused and not _exists(ctx.broker, *tp)}
    if missing or refused:
        return {tp: E.topic_authorization_failed if tp[0] in refused else
                E.unknown_topic_or_partition if tp in missing else E.operation_not_attempted
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
    if not cluster(ctx, Operation.CLUSTER_ACTION):  # v4+ is meant for brokers
        return make(cls, throttle_time=ZERO, error_code=E.cluster_authorization_failed,
                    results_by_transaction=())
    results = []
    for txn in req.transactions:
        errors = await _answer(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                               txn.topics, txn.verify_only)
        results.append(mod.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                    topic_results=_topic_results(mod, errors)))
    return make(cls, throttle_time=ZERO, error_code=E.none, results_by_transaction=tuple(results))
