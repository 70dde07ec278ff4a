# OffsetFetch (key 9), v1-9.
#
# Returns committed offsets, whatever the group's state (groups may use Kafka only to store
# offsets). A partition without a committed offset answers offset -1, leader epoch -1,
# metadata "" and no error; a null topic list (v2+) means every partition the group has.
# Metadata comes back byte for byte as committed. Version notes: v1 has no top-level error,
# so a group-level error (e.g. COORDINATOR_LOAD_IN_PROGRESS) is put on every partition; v2+
# answer it at the top (v8+: per group); v5+ add the committed leader epoch; v7+ carry
# require_stable: a partition with offsets pending in an open transaction (TxnOffsetCommit)
# then answers UNSTABLE_OFFSET_COMMIT with offset -1, as Kafka (the client retries; without
# require_stable the last committed offset is returned);
# v8+ fetch several groups per request; v9's member id/epoch (new consumer protocol) are
# ignored for classic groups; for a KIP-848 consumer group they are checked
# (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; an admin fetch without member id passes).
# Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on topics: named
# ones answer TOPIC_AUTHORIZATION_FAILED, an all-topics fetch leaves them out.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType


def _wanted(topics) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(t.name, i) for t in topics for i in t.partition_indexes]


def _stable(coord, req, group_id: str, entries):
    """`entries` with the offsets pending in a transaction marked unstable (require_stable)."""
    if not getattr(req, "require_stable", False) or not entries:
        return entries
    unstable = coord.unstable_offsets(group_id, [tp for tp, _ in entries])
    return [(tp, _UNSTABLE if tp in unstable else o) for tp, o in entries]


_UNSTABLE = object()
_DENIED = object()


def _fetch(ctx, req, group_id: str, topics) -> tuple[ErrorCode, list]:
    """The group's offsets as the principal may see them (KafkaApis): DESCRIBE on the group,
    else GROUP_AUTHORIZATION_FAILED; topics without DESCRIBE are left out of an all-topics
    fetch and answer TOPIC_AUTHORIZATION_FAILED when named."""
    coord = ctx.broker.groups
    if not check(ctx, Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    wanted = _wanted(topics)
    if wanted is None:
        err, entries = coord.fetch_offsets(group_id, None)
        refused = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                         (tp[0] for tp, _ in entries))
        return err, _stable(coord, req, group_id,
                            [e for e in entries if e[0][0] not in refused])
    refused = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (n for n, _ in wanted))
    err, entries = coord.fetch_offsets(
        group_id, [tp for tp in wanted if tp[0] not in refused] if refused else wanted)
    entries = _stable(coord, req, group_id, entries)
    if refused and err == ErrorCode.none:
        entries = list(entries) + [(tp, _DENIED) for tp in wanted if tp[0] in refused]
    return err, entries


def _topics(mod, topic_cls: str, part_cls: str, entries, error: ErrorCode | None = None):
    by_topic: dict[str, list] = {}
    for (name, idx), o in entries:
        err = error if error is not None else ErrorCode.none
        if o is _UNSTABLE:
            o, err = None, ErrorCode.unstable_offset_commit
        elif o is _DENIED:
            o, err = None, ErrorCode.topic_authorization_failed
        by_topic.setdefault(name, []).append(make(
            getattr(mod, part_cls), partition_index=idx,
            committed_offset=o.offset if o else -1,
            committed_leader_epoch=o.leader_epoch if o else -1,
            metadata=o.metadata if o else "",
            error_code=err))
    return tuple(getattr(mod, topic_cls)(name=n, partitions=tuple(ps))
                 for n, ps in by_topic.items())


def _member_error(b, g) -> ErrorCode | None:
    """v9+ names the member of a consumer (KIP-848) group: UNKNOWN_MEMBER_ID or
    STALE_MEMBER_EPOCH as Kafka's ConsumerGroup.validateOffsetFetch."""
    group = b.groups.consumer_groups.get(g.group_id)
    if group is None:
        return None
    return group.validate_fetch(getattr(g, "member_id", None), getattr(g, "member_epoch", -1))


@api(9, "OffsetFetch", (1, 9))
async def handle(ctx, req):
    v = ctx.api_version
    coord = ctx.broker.groups
    mod = response_module(9, v)
    cls = response_class(9, v)
    if v >= 8:
        groups = []
        for g in req.groups:
            err = _member_error(ctx.broker, g) if check(
                ctx, Operation.DESCRIBE, ResourceType.GROUP, g.group_id) else None
            if err is not None:
                groups.append(mod.OffsetFetchResponseGroup(group_id=g.group_id, error_code=err,
                                                           topics=()))
                continue
            err, entries = _fetch(ctx, req, g.group_id, g.topics)
            groups.append(mod.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=err,
                topics=_topics(mod, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions",
                               entries)))
        return make(cls, throttle_time=ZERO, groups=tuple(groups))
    wanted = _wanted(req.topics)
    err, entries = _fetch(ctx, req, req.group_id, req.topics)
    if err != ErrorCode.none and v < 2:
        topics = _topics(mod, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
                         [(tp, None) for tp in wanted or ()], err)
    else:
        topics = _topics(mod, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
                         entries)
    return make(cls, throttle_time=ZERO, error_code=err, topics=topics)
