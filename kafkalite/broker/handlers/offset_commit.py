# OffsetCommit (key 8), v2-9.
#
# Commits offsets for a group (coordinator/offsets.py): a member of the current generation,
# or a "simple" consumer (generation -1) committing to an Empty group. Partitions of topics
# that do not exist get UNKNOWN_TOPIC_OR_PARTITION and are not stored (as Kafka's
# KafkaApis). The metadata string is stored and returned byte for byte; a null one is stored
# as "" (Kafka's NoMetadata). Version notes: v2-4 carry retention_time (-1: the broker's
# offsets.retention.minutes; else an explicit expiry); v6+ committed leader epoch; v7+
# group.instance.id; v9 names the generation generation_id_or_member_epoch (the classic
# protocol reads it as a generation; a KIP-848 consumer group as the member epoch:
# STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID, and members of such groups must use v9, else
# UNSUPPORTED_VERSION, as Kafka). Authorization: READ on the group (else every partition
# GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED). v0/v1 (ZooKeeper-era) are not served, as Kafka 4.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ...coordinator.groups import CommittedOffset
from ...coordinator.groups_registry import store_error
from ...coordinator.offsets_log import NotReplicated
from ..build import ZERO, make, response_module, to_ms
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType


TP = tuple[str, int]


def requested(b, req, now: int, expire: int = -1, refused: set | frozenset = frozenset()
              ) -> tuple[list[TP], dict[TP, ErrorCode], dict[TP, CommittedOffset]]:
    """The partitions in request order, the answers already known (topics that do not
    exist: UNKNOWN_TOPIC_OR_PARTITION, as Kafka's KafkaApis; `refused` ones, without READ:
    TOPIC_AUTHORIZATION_FAILED), and the offsets to commit.
    Shared with TxnOffsetCommit, whose partitions have the same fields."""
    answers: dict[TP, ErrorCode] = {}
    wanted: dict[TP, CommittedOffset] = {}
    order: list[TP] = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if t.name in refused:
                answers[tp] = ErrorCode.topic_authorization_failed
            elif b.logs.partition(*tp) is None:
                answers[tp] = ErrorCode.unknown_topic_or_partition
            else:
                wanted[tp] = CommittedOffset(p.committed_offset,
                                             getattr(p, "committed_leader_epoch", -1),
                                             p.committed_metadata or "", now, expire)
    return order, answers, wanted


def group_refusal(ctx, req, order: list[TP]) -> dict[TP, ErrorCode] | None:
    """Every partition's answer when the principal may not READ the group (and, for
    TxnOffsetCommit, WRITE its transactional id, checked first as KafkaApis); else None."""
    txn_id = getattr(req, "transactional_id", None)
    if txn_id is not None and not check(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                        txn_id):
        return dict.fromkeys(order, ErrorCode.transactional_id_authorization_failed)
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return dict.fromkeys(order, ErrorCode.group_authorization_failed)
    return None


def refused_topics(ctx, req) -> set[str]:
    """The request's topics the principal may not READ."""
    return denied(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in req.topics))


async def sync_offsets(b, group_id: str, answers: dict[TP, ErrorCode]) -> None:
    """Committed offsets are acknowledged data too: in a cluster the answer waits for the
    ISR (OffsetsLog.replicated); with fsync-before-ack, sync the group's partition before
    answering (KAFKA_STORAGE_ERROR for what was written if that fails)."""
    written = [tp for tp, e in answers.items() if e == ErrorCode.none]
    store = b.groups.store
    if written:
        code = await store.replicated(store.partition_for(group_id))
        if code:
            answers.update(dict.fromkeys(written, store_error(NotReplicated(code, group_id)).code))
            return
    if not written or not b.config["kafkalite.fsync.before.ack"]:
        return
    try:
        await b.sync([store.ensure_topic().partitions[store.partition_for(group_id)]])
    except OSError:
        answers.update(dict.fromkeys(written, ErrorCode.kafka_storage_error))


def respond(api_key: int, v: int, prefix: str, order: list[TP],
            answers: dict[TP, ErrorCode]):
    """The response: per topic, per partition, its error, in request order."""
    mod = response_module(api_key, v)
    part_cls = getattr(mod, f"{prefix}ResponsePartition")
    topic_cls = getattr(mod, f"{prefix}ResponseTopic")
    topics: dict[str, list] = {}
    for name, idx in order:
        topics.setdefault(name, []).append(part_cls(partition_index=idx,
                                                    error_code=answers[(name, idx)]))
    return make(response_class(api_key, v), throttle_time=ZERO,
                topics=tuple(topic_cls(name=n, partitions=tuple(ps))
                             for n, ps in topics.items()))


@api(8, "OffsetCommit", (2, 9))
async def handle(ctx, req):
    b = ctx.broker
    coord = b.groups
    now = coord.wall_ms()
    retention = to_ms(req.retention_time) if hasattr(req, "retention_time") else -1
    order, answers, wanted = requested(b, req, now, now + retention if retention >= 0 else -1,
                                       refused_topics(ctx, req))
    refusal = group_refusal(ctx, req, order)
    if refusal is not None:
        return respond(8, ctx.api_version, "OffsetCommit", order, refusal)
    group = coord.consumer_groups.get(req.group_id)
    if group is not None and wanted:
        # A KIP-848 group: the member epoch is checked here; the offsets go to the group's
        # member-less classic twin, which offsets.py stores like a simple consumer's.
        err = group.validate_commit(req.member_id, req.generation_id_or_member_epoch,
                                    ctx.api_version)
        answers.update(dict.fromkeys(wanted, err) if err is not None else
                       coord.commit_offsets(req.group_id, "", None, -1, wanted))
    elif wanted:
        answers.update(coord.commit_offsets(
            req.group_id, req.member_id, getattr(req, "group_instance_id", None),
            req.generation_id_or_member_epoch, wanted))
    await sync_offsets(b, req.group_id, answers)
    return respond(8, ctx.api_version, "OffsetCommit", order, answers)
