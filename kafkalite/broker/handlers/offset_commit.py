# OffsetCommit (key 8), v2-9.
#
# Commits offsets for a group (coordinator/offsets.py): a member of the current generation,
# or a "simple" consumer (generation -1) committing to an Empty group. Partitions of topics
# that do not exist get UNKNOWN_TOPIC_OR_PARTITION and are not stored (as Kafka's
# KafkaApis). The metadata string is stored and returned byte for byte; a null one is stored
# as "" (Kafka's NoMetadata). Version notes: v2-4 carry retention_time (-1: the broker's
# offsets.retention.minutes; else an explicit expiry); v6+ committed leader epoch; v7+
# group.instance.id; v9 names the generation generation_id_or_member_epoch (the classic
# protocol reads it as a generation). v0/v1 (ZooKeeper-era) are not served, as Kafka 4.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ...coordinator.groups import CommittedOffset
from ..build import ZERO, make, response_module, to_ms
from ..registry import api


@api(8, "OffsetCommit", (2, 9))
async def handle(ctx, req):
    v = ctx.api_version
    b = ctx.broker
    coord = b.groups
    now = coord.wall_ms()
    retention = to_ms(req.retention_time) if hasattr(req, "retention_time") else -1
    expire = now + retention if retention >= 0 else -1
    answers: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommittedOffset] = {}
    order: list[tuple[str, int]] = []
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
    if wanted:
        answers.update(coord.commit_offsets(
            req.group_id, req.member_id, getattr(req, "group_instance_id", None),
            req.generation_id_or_member_epoch, wanted))
    if wanted and b.config["kafkalite.fsync.before.ack"]:
        # Committed offsets are acknowledged data too: sync them before answering.
        store = coord.store
        try:
            await b.sync([store.ensure_topic().partitions[store.partition_for(req.group_id)]])
        except OSError:
            for tp in wanted:
                if answers.get(tp) == ErrorCode.none:
                    answers[tp] = ErrorCode.kafka_storage_error
    mod = response_module(8, v)
    topics: dict[str, list] = {}
    for name, idx in order:
        topics.setdefault(name, []).append(mod.OffsetCommitResponsePartition(
            partition_index=idx, error_code=answers[(name, idx)]))
    return make(response_class(8, v), throttle_time=ZERO,
                topics=tuple(mod.OffsetCommitResponseTopic(name=n, partitions=tuple(ps))
                             for n, ps in topics.items()))
