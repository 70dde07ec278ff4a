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
# UNSUPPORTED_VERSION, as Kafka). v0/v1 (ZooKeeper-era) are not served, as Kafka 4.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ...coordinator.groups import CommittedOffset
from ..build import ZERO, make, response_module, to_ms
from ..registry import api


TP = tuple[str, int]


def requested(b, req, now: int, expire: int = -1
              ) -> tuple[list[TP], dict[TP, ErrorCode], dict[TP, CommittedOffset]]:
    """The partitions in request order, the answers already known (topics that do not
    exist: UNKNOWN_TOPIC_OR_PARTITION, as Kafka's KafkaApis), and the offsets to commit.
    Shared with TxnOffsetCommit, whose partitions have the same fields."""
    answers: dict[TP, ErrorCode] = {}
    wanted: dict[TP, CommittedOffset] = {}
    order: list[TP] = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if b.logs.partition(*tp) is None:
                answers[tp] = ErrorCode.unknown_topic_or_partition
            else:
                wanted[tp] = CommittedOffset(p.committed_offset,
                                             getattr(p, "committed_leader_epoch", -1),
                                             p.committed_metadata or "", now, expire)
    return order, answers, wanted


async def sync_offsets(b, group_id: str, answers: dict[TP, ErrorCode]) -> None:
    """Committed offsets are acknowledged data too: with fsync-before-ack, sync the group's
    partition before answering (KAFKA_STORAGE_ERROR for what was written if that fails)."""
    written = [tp for tp, e in answers.items() if e == ErrorCode.none]
    if not written or not b.config["kafkalite.fsync.before.ack"]:
        return
    store = b.groups.store
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
    order, answers, wanted = requested(b, req, now, now + retention if retention >= 0 else -1)
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
