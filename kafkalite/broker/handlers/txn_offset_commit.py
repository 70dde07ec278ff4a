# TxnOffsetCommit (key 28), v0-4.
#
# Commits a consumer group's offsets inside the producer's transaction (coordinator/
# offsets_txn.py): they are written to the group's __consumer_offsets partition as a
# transactional batch and stay pending, invisible to OffsetFetch, until EndTxn's marker on
# that partition commits or aborts them. The order of checks is Kafka's: the group id
# (empty: INVALID_GROUP_ID) and the coordinator's state (COORDINATOR_LOAD_IN_PROGRESS while
# loading), then KIP-890 verification that AddOffsetsToTxn put the group's partition into the
# producer's ongoing transaction, unless the producer's transaction is already open in that
# partition: asked of the transaction coordinator, here or on another broker of a cluster by
# AddPartitionsToTxn v4 verify_only (cluster/txn_verifier.py); INVALID_TXN_STATE when not
# (v4: TRANSACTION_ABORTABLE, as Kafka 3.8), INVALID_PRODUCER_EPOCH for another epoch, a
# coordinator not reachable as Kafka's GroupMetadataManager.maybeConvertOffsetCommitError
# (a lost connection COORDINATOR_LOAD_IN_PROGRESS, none live COORDINATOR_NOT_AVAILABLE); then the
# member/generation check (v3+: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID;
# none when no member is named). Partitions of topics that do not exist answer
# UNKNOWN_TOPIC_OR_PARTITION; metadata longer than offset.metadata.max.bytes
# OFFSET_METADATA_TOO_LARGE. Version notes: v0-2 carry no member, generation or instance id;
# v2+ the committed leader epoch; v3 is the first flexible version; v4 (KIP-890) only lets the
# client read TRANSACTION_ABORTABLE. Gap: v5 (Kafka 4.0's transaction protocol v2, with
# partitions added implicitly) is not served, as Kafka 3.8 does not. Authorization first, as
# KafkaApis: WRITE on the transactional id, READ on the group (every partition gets the
# error), READ on each topic (TOPIC_AUTHORIZATION_FAILED).
from __future__ import annotations

from ...cluster.txn_verifier import abortable, verify
from ...coordinator.offsets_log import TOPIC
from ...wire.errors import ErrorCode
from ..registry import api
from .offset_commit import group_refusal, refused_topics, requested, respond, sync_offsets


# GroupMetadataManager.maybeConvertOffsetCommitError: what a failed verification answers
_FOR_OFFSETS = {ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
                ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
                ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
                ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
                ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
                ErrorCode.kafka_storage_error: ErrorCode.not_coordinator}


async def _verify(b, coord, req, version: int) -> ErrorCode:
    """The transaction coordinator's answer for the group's offsets partition (here or on
    another broker: cluster/txn_verifier.py), not asked when the producer's transaction is
    already open in that partition (Kafka's maybeStartTransactionVerificationForPartition)."""
    err = coord.check_status(req.group_id, allow_empty_id=False)
    if err is not None:
        return err
    if getattr(b, "transactions", None) is None:
        return ErrorCode.none
    partition = coord.store.partition_for(req.group_id)
    topic = b.logs.get(TOPIC)
    if topic is not None and 0 <= partition < len(topic.partitions) and \
            req.producer_id in b.producer_state(topic.partitions[partition]).ongoing:
        return ErrorCode.none
    unverified = await verify(b, req.transactional_id, req.producer_id, req.producer_epoch,
                              [(TOPIC, partition)])
    # TRANSACTION_ABORTABLE from v4 on (measured on Kafka 3.8)
    err = abortable(unverified.get((TOPIC, partition), ErrorCode.none), version >= 4)
    return _FOR_OFFSETS.get(err, err)


@api(28, "TxnOffsetCommit", (0, 4))
async def handle(ctx, req):
    b = ctx.broker
    coord = b.groups
    order, answers, wanted = requested(b, req, coord.wall_ms(), refused=refused_topics(ctx, req))
    refusal = group_refusal(ctx, req, order)
    if refusal is not None:
        return respond(28, ctx.api_version, "TxnOffsetCommit", order, refusal)
    if wanted:
        err = await _verify(b, coord, req, ctx.api_version)
        if err != ErrorCode.none:
            answers.update(dict.fromkeys(wanted, err))
        else:
            answers.update(coord.txn_offset_commit(
                req.transactional_id, req.group_id, req.producer_id, req.producer_epoch,
                getattr(req, "member_id", ""), getattr(req, "generation_id", -1),
                getattr(req, "group_instance_id", None), wanted))
    await sync_offsets(b, req.group_id, answers)
    return respond(28, ctx.api_version, "TxnOffsetCommit", order, answers)
