# ShareFetch (key 78), v1-2.
#
# KIP-932's fetch for share-group members. A share session per (group, member): epoch 0
# opens it with the partitions named, later epochs must follow on (SHARE_SESSION_NOT_FOUND,
# INVALID_SHARE_SESSION_EPOCH), add partitions and drop forgotten ones, epoch -1 closes it
# and releases the member's acquired records. Piggybacked acknowledgements are applied
# first (not allowed when opening a session: INVALID_REQUEST), each partition's outcome
# answered in acknowledge_error_code.
#
# Then for each session partition the records to deliver are acquired (SharePartition):
# the log is read from the first AVAILABLE in-flight offset (else the share-partition end)
# and returned as whole stored batches, with AcquiredRecords ranges saying which offsets
# this member now holds and their delivery counts; the client drops the rest. Only batch
# headers are read (base offset, length, last offset delta), never records. With nothing to
# acquire the request waits for appends up to max_wait. Limits: max_records (whole batches,
# so it may be exceeded, as Kafka), max_bytes across partitions; the in-flight window of
# group.share.partition.max.record.locks. acquisition_lock_timeout is the group's
# share.record.lock.duration.ms.
# share.isolation.level (GROUP config): read_committed reads only below the LSO and archives
# the batches of aborted transactions (found in the aborted-transaction index, as Fetch's
# aborted_transactions) instead of acquiring them, as Kafka's share fetch does. When
# retention or DeleteRecords moved the log start offset past the share-partition start
# offset, the SPSO moves up to it first.
# The answer goes as soon as any session partition has records acquired (min_bytes is taken
# as 1: librdkafka and the Java client send 1), else at max_wait.
# ACLs (Kafka 4.x KafkaApis.handleShareFetchRequest): READ on the group (the whole answer
# GROUP_AUTHORIZATION_FAILED), then READ on each topic of the request and of the session: a
# refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED, are never acquired or
# initialised, and their piggybacked acknowledgements TOPIC_AUTHORIZATION_FAILED, unapplied.
# Gaps: v2's RENEW acknowledge type is refused.
from __future__ import annotations

import asyncio
import struct

from ...coordinator.share_sessions import FINAL_EPOCH, INITIAL_EPOCH
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, ms, response_module, to_ms
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType
from ._share import apply_acks, refused_topics, share_coordinator
from ._storage import LogError

_HEADER = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, at byte 23 of a batch
_ATTRS = struct.Struct(">h")  # attributes, at byte 21
_PID = struct.Struct(">q")  # producer id, at byte 43
_TRANSACTIONAL, _CONTROL = 0x10, 0x20


def batch_bounds(data: bytes | bytearray | memoryview) -> list[tuple[int, int, int]]:
    """(base offset, last offset, end position) of each whole batch in `data`."""
    out = []
    pos, size = 0, len(data)
    while pos + 27 <= size:
        base, length = _HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if end > size:
            break
        out.append((base, base + _LAST_DELTA.unpack_from(data, pos + 23)[0], end))
        pos = end
    return out


def _aborted(p, data, bounds, start: int) -> list[bool]:
    """For each batch: whether it belongs to an aborted transaction (read_committed), from
    the aborted-transaction index, as Fetch's aborted_transactions are collected."""
    if not bounds or not p.may_have_aborted(start):
        return [False] * len(bounds)
    txns = p.collect_aborted(start, bounds[-1][1] + 1)
    out = []
    pos = 0
    for base, _last, end in bounds:
        attrs = _ATTRS.unpack_from(data, pos + 21)[0]
        pid = _PID.unpack_from(data, pos + 43)[0]
        out.append(bool(attrs & _TRANSACTIONAL) and not attrs & _CONTROL and any(
            t.producer_id == pid and t.first_offset <= base <= t.last_offset for t in txns))
        pos = end
    return out


async def _acquire(broker, sc, group_id: str, member_id: str, keys, max_bytes: int,
                   max_records: int) -> dict:
    """{(topic, partition): (data, acquired ranges)} for the partitions with records."""
    out = {}
    committed = sc.group_config(group_id, "share.isolation.level") == "read_committed"
    for topic, idx in keys:
        if max_bytes <= 0 or max_records <= 0:
            break
        p = broker.logs.partition(topic, idx)
        sp = sc.partition(group_id, topic, idx) if p is not None else None
        if sp is None:
            continue
        if p.log_start_offset > sp.start:
            sp.move_start(p.log_start_offset)
        start = sp.next_fetch_offset()
        upper = p.last_stable_offset if committed else p.high_watermark
        if start is None or start >= upper:
            continue
        try:
            data = await p.read_async(start, max_bytes, True,
                                      max_offset=upper if committed else None)
        except LogError:
            continue
        bounds = batch_bounds(data)
        aborted = _aborted(p, data, bounds, start) if committed else [False] * len(bounds)
        ranges = sp.acquire(member_id, [(b, last, a) for (b, last, _), a
                                        in zip(bounds, aborted)], max_records)
        if not ranges:
            continue
        last_acquired = ranges[-1][1]
        cut = next(end for _b, last, end in bounds if last >= last_acquired)
        data = bytes(data[:cut])
        out[(topic, idx)] = (data, ranges)
        max_bytes -= len(data)
        max_records -= sum(last - first + 1 for first, last, _ in ranges)
    return out


@api(78, "ShareFetch", (1, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(78, v)
    broker = ctx.broker
    sc = share_coordinator(broker)
    lock_ms = sc.lock_duration_ms(req.group_id) if req.group_id else 0

    def top_error(code: E, message: str | None = None):
        return make(mod.ShareFetchResponse, throttle_time=ZERO, error_code=code,
                    error_message=message, acquisition_lock_timeout=ms(lock_ms),
                    responses=(), node_endpoints=())

    if not req.group_id or not req.member_id:
        return top_error(E.invalid_request, "group id and member id must be set")
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return top_error(E.group_authorization_failed, "Group authorization failed.")
    if sc.loading:  # share-partitions initialise from the replayed state, as Kafka's wait
        await sc.loaded.wait()  # for their persister read
    has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    epoch = req.share_session_epoch
    if epoch == INITIAL_EPOCH:
        if has_acks:
            return top_error(E.invalid_request,
                             "Acknowledge data present in initial ShareFetch request")
        session = sc.sessions.open(req.group_id, req.member_id)
    else:
        session = sc.sessions.check(req.group_id, req.member_id, epoch)
    if isinstance(session, E):
        return top_error(session)
    if any(t not in (0, 1, 2, 3) for tp in req.topics for p in tp.partitions
           for b in p.acknowledgement_batches for t in b.acknowledge_types):
        return top_error(E.invalid_request, "unsupported acknowledge type")

    logs = broker.logs
    errors: dict = {}
    for ft in req.forgotten_topics_data:
        topic = logs.by_id.get(ft.topic_id)
        for idx in ft.partitions:
            if topic is not None:
                session.partitions.pop((topic.name, idx), None)
    for t in req.topics:
        topic = logs.by_id.get(t.topic_id)
        for p in t.partitions:
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                errors[(t.topic_id, p.partition_index)] = (
                    E.unknown_topic_id if topic is None else E.unknown_topic_or_partition)
            elif epoch != FINAL_EPOCH:
                session.partitions[(topic.name, p.partition_index)] = None
    # READ on every topic of the request and of the session: a refused topic's partitions
    # answer TOPIC_AUTHORIZATION_FAILED, are never acquired, their acks never applied.
    refused = refused_topics(ctx, {n for n, _ in session.partitions} | {
        logs.by_id[t.topic_id].name for t in req.topics if t.topic_id in logs.by_id})
    if epoch != FINAL_EPOCH:
        for topic_name, idx in session.partitions:  # initialised (and written) on first use
            if topic_name in refused:
                if topic_name in logs.topics:
                    errors[(logs.topics[topic_name].topic_id, idx)] = \
                        E.topic_authorization_failed
            else:
                sc.partition(req.group_id, topic_name, idx)
    acks = apply_acks(broker, sc, req.group_id, req.member_id, req.topics, refused)
    await sc.persist()  # acknowledged means durable (share_state.py)

    fetched: dict = {}
    if epoch == FINAL_EPOCH:
        sc.close_session(req.group_id, req.member_id)
    else:
        keys = [k for k in session.partitions if k[0] not in refused]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + to_ms(req.max_wait) / 1000.0
        max_records = req.max_records if req.max_records > 0 else 500
        for _ in range(1000):  # bounded: each pass waits for an append or the deadline
            fetched = await _acquire(broker, sc, req.group_id, req.member_id, keys,
                                     req.max_bytes, max_records)
            remaining = deadline - loop.time()
            if fetched or remaining <= 0 or not keys or broker.closing:
                break
            await broker.notifier.wait(keys, min(remaining, 0.1))

    leader = mod.LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=0)
    by_topic: dict = {}
    for (topic, idx), (data, ranges) in fetched.items():
        tid = logs.topics[topic].topic_id
        by_topic.setdefault(tid, {})[idx] = (E.none, data, ranges)
    for (tid, idx), code in errors.items():
        by_topic.setdefault(tid, {})[idx] = (code, None, ())
    for (tid, idx) in acks:
        by_topic.setdefault(tid, {}).setdefault(idx, (E.none, None, ()))
    responses = []
    for tid, parts in by_topic.items():
        entries = []
        for idx, (code, data, ranges) in sorted(parts.items()):
            ack_code, ack_msg = acks.get((tid, idx), (E.none, None))
            entries.append(make(
                mod.PartitionData, partition_index=idx, error_code=code,
                acknowledge_error_code=ack_code, acknowledge_error_message=ack_msg,
                # kio writes records as non-nullable: an ack-only or failed partition
                # answers empty records, which clients read as no batches.
                current_leader=leader, records=b"" if data is None else data,
                acquired_records=tuple(mod.AcquiredRecords(
                    first_offset=f, last_offset=last, delivery_count=c)
                    for f, last, c in ranges)))
        responses.append(mod.ShareFetchableTopicResponse(topic_id=tid,
                                                         partitions=tuple(entries)))
    return make(mod.ShareFetchResponse, throttle_time=ZERO, error_code=E.none,
                acquisition_lock_timeout=ms(lock_ms), responses=tuple(responses),
                node_endpoints=())
