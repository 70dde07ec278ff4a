# ListOffsets (key 2), v1-10.
#
# Timestamps: -1 latest (the high watermark), -2 earliest (log start offset), -3 the record
# with the largest timestamp (v7+, KIP-734), -4 earliest local (= earliest, no tiered
# storage), -5 earliest pending upload (none: offset -1); any other value finds, through the
# time index and a scan of batch headers, the first record whose timestamp is at or after it
# (only that batch is decoded); none found answers offset -1 and timestamp -1. A batch that
# does not decode answers CORRUPT_MESSAGE for its partition (Kafka's CorruptRecordException).
# The answered leader epoch, as Kafka's Partition.fetchOffsetForTimestamp: latest answers the
# partition's current leader epoch; any other lookup the epoch the found offset was written
# in (the log's leader-epoch cache). On one node every epoch is 0. After a leader change
# the new leader's high watermark can lag the start of its epoch until the followers catch
# up: latest, and lookups, then answer OFFSET_NOT_AVAILABLE, as Kafka, so a client does not
# take an offset below what it may already have read for the end. Lookups by time or -3 do
# not find offsets at or past the high watermark (read_uncommitted) or the LSO. Leadership
# and current_leader_epoch are the cluster view's: one node leads at epoch 0 (a newer
# epoch: UNKNOWN_LEADER_EPOCH); in a cluster a partition this broker does not lead answers
# NOT_LEADER_OR_FOLLOWER, an older epoch FENCED_LEADER_EPOCH. v10 (Kafka
# 4.0, KIP-1075) adds timeout_ms, the wait for a tiered-storage offset; nothing here waits,
# so it is read and ignored (Kafka 3.8 serves up to v8). A partition named more than once in
# one request is INVALID_REQUEST at each mention, as Kafka's duplicatePartitions check.
# isolation_level=1 (read_committed, v2+): latest is the last stable offset, and an offset
# found by timestamp (or -3) at or past it is answered as not found, as Kafka's
# fetchOffsetForTimestamp bounds lookups by the last fetchable offset.
# Lookups by time and -3 read segments without waiting for the disk on the event loop
# (log/partition_lookup.py: page-cache reads at once, cold ranges through a worker thread).
from __future__ import annotations

from collections import Counter

from ...cluster.view import NO_EPOCH
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType
from ._storage import LogError, log_error_code

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5


async def lookup(p, timestamp: int, committed: bool = False) -> tuple[int, int]:
    """(timestamp, offset) answer for one partition: nothing at or past the last fetchable
    offset (the LSO read_committed, else the high watermark) is found."""
    ts, off = await _lookup(p, timestamp)
    fetchable = p.last_stable_offset if committed else p.high_watermark
    if timestamp == LATEST:
        return -1, fetchable
    searched = timestamp >= 0 or timestamp == MAX_TIMESTAMP
    return (-1, -1) if searched and off >= fetchable else (ts, off)


def _epoch_lag(p, leader_epoch: int) -> bool:
    """Whether the high watermark lags the start of this leader's epoch (a new leader whose
    followers have not caught up): Kafka answers OFFSET_NOT_AVAILABLE then."""
    entries = p.epochs.entries
    if not entries or entries[-1][0] != leader_epoch:
        return False
    return entries[-1][1] > p.high_watermark


async def _lookup(p, timestamp: int) -> tuple[int, int]:
    if timestamp == LATEST:
        return -1, p.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, p.log_start_offset
    if timestamp == EARLIEST_PENDING_UPLOAD:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        hit = await p.max_timestamp_offset_async()
        return (hit[1], hit[0]) if hit else (-1, -1)
    if timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"invalid timestamp {timestamp}")
    hit = await p.offset_for_timestamp_async(timestamp)
    return (hit[1], hit[0]) if hit else (-1, -1)


@api(2, "ListOffsets", (1, 10))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(2, v)
    logs = ctx.broker.logs
    view = ctx.broker.view
    committed = getattr(req, "isolation_level", 0) == 1
    named = Counter((t.name, rp.partition_index) for t in req.topics for rp in t.partitions)
    refused = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))

    async def answer(name, rp):
        p = logs.partition(name, rp.partition_index)
        try:
            if name in refused:  # before anything else, as KafkaApis
                raise KafkaError(ErrorCode.topic_authorization_failed)
            if named[name, rp.partition_index] > 1:
                raise KafkaError(ErrorCode.invalid_request)
            code = view.leader_error(name, rp.partition_index,
                                     getattr(rp, "current_leader_epoch", NO_EPOCH))
            if code or p is None:
                raise KafkaError(code or ErrorCode.unknown_topic_or_partition)
            try:
                ts, off = await lookup(p, rp.timestamp, committed)
            except (ValueError, IndexError) as e:  # a stored batch that does not decode
                raise KafkaError(ErrorCode.corrupt_message, str(e)) from None
            leader_epoch = view.leader_epoch(name, rp.partition_index)
            searched = rp.timestamp not in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD)
            if searched and (off < 0 or rp.timestamp == LATEST) and v >= 2 \
                    and _epoch_lag(p, leader_epoch):  # v0-1 carry no isolation level
                raise KafkaError(ErrorCode.offset_not_available)
            if off < 0:
                epoch = -1  # no offset: no epoch
            elif rp.timestamp == LATEST:
                epoch = max(leader_epoch, 0)
            else:
                epoch = p.epochs.epoch_for_offset(off)
            code = ErrorCode.none
        except KafkaError as e:
            ts, off, code, epoch = -1, -1, e.code, -1
        except LogError as e:
            ts, off, epoch = -1, -1, -1
            code = log_error_code(e, f"{name}-{rp.partition_index}")
        return make(mod.ListOffsetsPartitionResponse, partition_index=rp.partition_index,
                    error_code=code, timestamp=ts, offset=off, leader_epoch=epoch,
                    old_style_offsets=())

    topics = []
    for t in req.topics:
        parts = [await answer(t.name, rp) for rp in t.partitions]
        topics.append(mod.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return make(response_class(2, v), throttle_time=ZERO, topics=tuple(topics))
