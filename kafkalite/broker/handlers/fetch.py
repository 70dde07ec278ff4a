# Fetch (key 1), v4-17.
#
# Reads whole batches straight from segment files (pread, no decoding; a range not in the
# page cache is read in a worker thread, never on the event loop) and sends them by
# reference: the response is a list of buffers, never one concatenated blob. max_bytes and
# partition_max_bytes bound the response, but the first partition with data returns at least
# one whole batch even if it is larger (KIP-74). Long polls wait for min_bytes or max_wait,
# woken by appends to the partitions they read. OFFSET_OUT_OF_RANGE carries the high
# watermark and log start offset. Sessions (KIP-227) are in fetch_sessions.py; v13+
# addresses topics by id (UNKNOWN_TOPIC_ID for unknown ids). A topic the principal may not
# READ answers TOPIC_AUTHORIZATION_FAILED, unread, and the fetch does not wait. The preferred
# read replica is -1. Leadership and current_leader_epoch come from the cluster view (one
# node: leader at epoch 0; in a cluster NOT_LEADER_OR_FOLLOWER on a partition this broker
# does not lead, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for an older / newer epoch, as
# Kafka's Partition.checkCurrentLeaderEpoch): such a partition is answered unread and the
# fetch does not wait. Replication (cluster/replication.py): a follower's fetch (replica_id
# >= 0) reads up to the log end and its fetch_offset tells the leader its LEO; consumers
# read only below the high watermark, and their long polls wake when it moves.
# Transactions: every answer carries the partition's last stable offset (LSO: the first
# offset of its oldest open transaction, else the high watermark). isolation_level=1
# (read_committed) reads only below the LSO and lists `aborted_transactions`, the aborted
# transactions overlapping the range returned (from the segments' .txnindex, as Kafka's
# collectAbortedTransactions: an empty list when none); clients drop their records and the
# control batches. isolation_level=0 returns everything up to the high watermark, control
# batches included, with a null list, as Kafka.
from __future__ import annotations

import asyncio
import struct
from collections import OrderedDict

from ...cluster.view import NO_EPOCH
from ...log.read_positions import walk_batches
from ...wire.errors import ErrorCode, KafkaError
from ...wire.primitives import EMPTY_TAGS, array_len, bytes_len, string
from ..build import to_ms
from ..fetch_sessions import FetchSessionCache, SessionPartition
from ..quotas import FETCH
from ..registry import api
from ...security.acl_check import cluster, denied
from ...security.acls import Operation, ResourceType
from ._storage import LogError, log_error_code

_PART = struct.Struct(">ihqq")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TOP7 = struct.Struct(">ihi")
_ABORTED = struct.Struct(">qq")
_UNKNOWN = (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id)


def encode_response(version: int, error: int, session_id: int, topics: list,
                    throttle_ms: int = 0) -> list:
    flex = version >= 12
    out: list = []
    cur = bytearray(_TOP7.pack(throttle_ms, error, session_id) if version >= 7
                    else _I32.pack(throttle_ms))
    cur += array_len(len(topics), flex)
    null_array = b"\x00" if flex else b"\xff\xff\xff\xff"
    for key, parts in topics:
        cur += key.bytes if version >= 13 else string(key, flex)
        cur += array_len(len(parts), flex)
        for idx, err, hw, start, data, *txn in parts:
            lso, aborted = txn if txn else (hw, None)
            cur += _PART.pack(idx, err, hw, lso)
            if version >= 5:
                cur += _I64.pack(start)
            # Kafka sends an empty aborted-transactions array for an unknown partition (its
            # error response), null otherwise (also with OFFSET_OUT_OF_RANGE), and at
            # read_committed the (possibly empty) list of aborted transactions.
            if aborted is not None:
                cur += array_len(len(aborted), flex)
                for producer_id, first_offset in aborted:
                    cur += _ABORTED.pack(producer_id, first_offset)
                    if flex:
                        cur += EMPTY_TAGS
            else:
                cur += array_len(0, flex) if err in _UNKNOWN else null_array
            if version >= 11:
                cur += b"\xff\xff\xff\xff"
            cur += bytes_len(len(data), flex)
            if data:
                out.append(bytes(cur))
                out.append(data)
                cur = bytearray()
            if flex:
                cur += EMPTY_TAGS
        if flex:
            cur += EMPTY_TAGS
    if flex:
        cur += EMPTY_TAGS
    out.append(bytes(cur))
    return out


def upper_bound(data, fetch_offset: int) -> int:
    """The offset after the batches in `data` (the last may be cut short: its whole range
    counts, as Kafka's fetchUpperBoundOffset takes the next batch's base offset)."""
    upper = walk_batches(data)[2]
    return upper if upper >= 0 else fetch_offset


def _committed(p, fetch_offset: int, data) -> tuple:
    """(LSO, aborted transactions) of a read_committed answer."""
    lso = p.last_stable_offset
    if not data or not p.may_have_aborted(fetch_offset):
        return lso, ()  # no walk of the returned batches when nothing was ever aborted
    aborted = p.collect_aborted(fetch_offset, upper_bound(data, fetch_offset))
    return lso, tuple((t.producer_id, t.first_offset) for t in aborted)


async def _read_all(broker, use_ids: bool, partitions, max_bytes: int, committed: bool,
                    earlier: dict | None = None, only: set | None = None,
                    below_hw: bool = False):
    """Read the partitions; returns ({key: part result}, bytes read, any error). With
    `earlier` and `only` (a long poll woken by appends), only the keys in `only` are read
    again: the other partitions had no appends, so their earlier answers still hold."""
    logs = broker.logs
    total = 0
    if earlier is not None:
        total = sum(len(r[4]) for k, r in earlier.items() if k not in only)
    remaining = max(max_bytes - total, 0)
    error = False
    out = {}
    for key, sp in partitions.items():
        tkey, idx = key
        if earlier is not None and key not in only and key in earlier:
            out[key] = earlier[key]
            continue
        topic = logs.by_id.get(tkey) if use_ids else logs.get(tkey)
        p = None
        if topic is not None and 0 <= idx < len(topic.partitions):
            p = topic.partitions[idx]
        if p is None:
            code = ErrorCode.unknown_topic_id if use_ids and topic is None \
                else ErrorCode.unknown_topic_or_partition
            out[key] = (idx, code, -1, -1, b"")
            error = True
            continue
        try:
            data = await p.read_async(sp.fetch_offset, min(sp.max_bytes, remaining), total == 0,
                                      p.last_stable_offset if committed else
                                      p.high_watermark if below_hw else None)
        except LogError as e:
            # Kafka answers a failed partition with -1 watermarks, OFFSET_OUT_OF_RANGE too.
            out[key] = (idx, log_error_code(e, f"{p.topic}-{idx}"), -1, -1, b"")
            error = True
            continue
        # Read after the data (a cold read yields to appends): data never passes hw.
        hw, start = p.high_watermark, p.log_start_offset
        total += len(data)
        remaining = max(remaining - len(data), 0)
        if committed:
            out[key] = (idx, ErrorCode.none, hw, start, data,
                                *_committed(p, sp.fetch_offset, data))
        else:
            out[key] = (idx, ErrorCode.none, hw, start, data, p.last_stable_offset,
                                None)
    return out, total, error


def _group(results: OrderedDict) -> list:
    topics: list = []
    for (tkey, _idx), r in results.items():
        if topics and topics[-1][0] == tkey:
            topics[-1][1].append(r)
        else:
            topics.append((tkey, [r]))
    return topics


@api(1, "Fetch", (4, 17))
async def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    use_ids = v >= 13
    sessions: FetchSessionCache = broker.fetch_sessions
    sid = getattr(req, "session_id", 0)
    epoch = getattr(req, "session_epoch", -1)
    requested: OrderedDict = OrderedDict()
    fenced: dict = {}
    epochs: dict = {}
    for t in req.topics:
        tkey = t.topic_id if use_ids else t.topic
        for fp in t.partitions:
            requested[(tkey, fp.partition)] = SessionPartition(fp.fetch_offset,
                                                               fp.partition_max_bytes)
            epochs[(tkey, fp.partition)] = getattr(fp, "current_leader_epoch", NO_EPOCH)
    session = None
    incremental = False
    try:
        if epoch in (0, -1):
            if sid:
                sessions.remove(sid)
            if epoch == 0:
                session = sessions.new(len(requested))
                session.partitions = requested
        else:
            session = sessions.get(sid, epoch)
            for ft in getattr(req, "forgotten_topics_data", ()):
                fkey = ft.topic_id if use_ids else ft.topic
                for idx in ft.partitions:
                    session.partitions.pop((fkey, idx), None)
            for k, sp in requested.items():
                have = session.partitions.get(k)
                if have is None:
                    session.partitions[k] = sp
                else:
                    have.fetch_offset, have.max_bytes = sp.fetch_offset, sp.max_bytes
            incremental = True
    except KafkaError as e:
        return encode_response(v, e.code, 0, [])
    partitions = session.partitions if session is not None else requested

    loop = asyncio.get_running_loop()
    max_wait = to_ms(req.max_wait) / 1000.0
    deadline = loop.time() + max_wait
    max_bytes = min(getattr(req, "max_bytes", 0x7FFFFFFF),
                    broker.quotas.fetch_max_bytes(ctx.client_id))  # client quotas
    names = _topic_names(broker, use_ids, partitions)
    view = broker.view
    for k in partitions:  # leadership and the client's leader epoch, once per partition
        name = names.get(k[0]) if use_ids else k[0]
        if name is not None:  # else an unknown topic id: UNKNOWN_TOPIC_ID from the read
            code = view.leader_error(name, k[1], epochs.get(k, NO_EPOCH))
            if code:
                fenced[k] = code
    readable = partitions
    refused = denied(ctx, Operation.READ, ResourceType.TOPIC,
                     (names[t] if use_ids else t for t, _ in partitions
                      if not use_ids or t in names))
    if refused:  # answered TOPIC_AUTHORIZATION_FAILED, never read (KafkaApis)
        for k in partitions:
            if names.get(k[0]) in refused:
                fenced[k] = ErrorCode.topic_authorization_failed
    # In a cluster a follower (replica_id >= 0; v15+ in replica_state) reads up to the log
    # end and its fetch_offset is its LEO for the leader; consumers read below the HW. A
    # follower needs CLUSTER_ACTION (KafkaApis: else every partition is refused).
    replication = broker.replication
    below_hw = replication is not None
    replica_id = req.replica_state.replica_id if v >= 15 else req.replica_id
    follower = replica_id >= 0 and replication is not None
    if follower and not cluster(ctx, Operation.CLUSTER_ACTION):
        fenced = dict.fromkeys(partitions, ErrorCode.topic_authorization_failed)
    if fenced:  # answered with their error, never read; the fetch does not wait
        readable = OrderedDict((k, sp) for k, sp in partitions.items() if k not in fenced)
    committed = getattr(req, "isolation_level", 0) == 1
    if follower:
        below_hw = False
        for k, sp in readable.items():
            name = names.get(k[0]) if use_ids else k[0]
            if name is not None:
                replication.follower_fetched(name, k[1], replica_id, sp.fetch_offset)
    results, total, error = await _read_all(broker, use_ids, readable, max_bytes, committed,
                                            below_hw=below_hw)
    error = error or bool(fenced)
    by_name = None
    while True:
        remaining = deadline - loop.time()
        if total >= req.min_bytes or error or remaining <= 0 or broker.closing:
            break
        if by_name is None:
            by_name = {(names[t], idx): (t, idx) for t, idx in readable if t in names}
        woken = await broker.notifier.wait(by_name, remaining)
        if not woken:  # the wait ran out: a last full read, as Kafka's DelayedFetch expiry
            results, total, error = await _read_all(broker, use_ids, readable, max_bytes,
                                                    committed, below_hw=below_hw)
            break
        results, total, error = await _read_all(broker, use_ids, readable, max_bytes,
                                                committed, results,
                                                {by_name[k] for k in woken}, below_hw)
    if fenced:  # in the request's order
        results = {k: (k[1], fenced[k], -1, -1, b"") if k in fenced else results[k]
                   for k in partitions}
    # Client quotas: a throttled fetch is answered empty, its bytes unrecorded, its session
    # moved on (Kafka's getThrottledResponse, KIP-219).
    sent = sum(len(r[4]) for r in results.values())
    ctx.throttle_ms = broker.quotas.record(FETCH, ctx.client_id, sent)
    if ctx.throttle_ms:
        broker.quotas.unrecord(FETCH, ctx.client_id, sent)
        if session is not None:
            session.epoch = epoch + 1 if incremental else 1
        return encode_response(v, ErrorCode.none, session.id if session else 0, [],
                               ctx.throttle_ms)
    for (tkey, _idx), r in results.items():
        if r[4]:
            broker.stats.fetched(names.get(tkey, str(tkey)), len(r[4]))
    if incremental:
        shown = OrderedDict()
        for k, r in results.items():
            sp = partitions[k]
            if r[4] or r[1] or r[2] != sp.last_hw or r[3] != sp.last_start or k in fenced:
                shown[k] = r
        results = shown
    if session is not None:
        session.epoch = epoch + 1 if incremental else 1
        for k, r in results.items():
            sp = partitions.get(k)
            if sp is not None:
                sp.last_hw, sp.last_start = r[2], r[3]
    return encode_response(v, ErrorCode.none, session.id if session else 0, _group(results),
                           ctx.throttle_ms)


def _topic_names(broker, use_ids: bool, partitions) -> dict:
    """Topic key (a name, or an id from v13) -> name, for the topics this broker has."""
    if not use_ids:
        return {t: t for t, _idx in partitions}
    out = {}
    for tid, _idx in partitions:
        if tid not in out:
            t = broker.view.topic_by_id(tid)
            if t is not None:
                out[tid] = t.name
    return out
