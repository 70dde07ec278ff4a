# Share-partition state in the internal topic __share_group_state, as Kafka 4.1's share
# coordinator keeps it (KIP-932). A share-partition lives in the state partition
# abs(javaHashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions
# (SharePartitionKey.asCoordinatorKey, ShareCoordinatorService.partitionFor). Two record
# types, Kafka's coordinator records:
#   key   int16 record type (0 ShareSnapshot, 1 ShareUpdate), then GroupId string,
#         TopicId uuid, Partition int32 (ShareSnapshotKey / ShareUpdateKey, version 0);
#   value int16 version 0, flexible: ShareSnapshotValue {SnapshotEpoch, StateEpoch,
#         LeaderEpoch int32, StartOffset, CreateTimestamp, WriteTimestamp int64,
#         StateBatches} / ShareUpdateValue {SnapshotEpoch, LeaderEpoch int32, StartOffset
#         int64 (-1: unchanged), StateBatches}; a StateBatch is FirstOffset, LastOffset int64,
#         DeliveryState int8 (0 available, 2 acknowledged, 4 archived), DeliveryCount int16.
# A snapshot is the whole state; an update carries only the state batches that changed, and
# replay lays them over the state so far (Kafka's ShareCoordinatorShard.merge).
#
# The topic (cleanup.policy=delete, as KIP-932 defines it) and its appends/replay are the
# offsets log's machinery pointed at this topic. Records below the oldest snapshot still
# needed in a partition are pruned by moving its log start offset (Kafka's state-topic
# pruner does the same with DeleteRecords).
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ..wire.primitives import read_uvarint, uvarint
from .offsets_log import OffsetsLog, partition_for

TOPIC = "__share_group_state"
SNAPSHOT, UPDATE = 0, 1
_KEY_TAIL = struct.Struct(">16si")
_SNAP_HEAD = struct.Struct(">hiiiqqq")  # version, snapshot/state/leader epoch, start, times
_UPDATE_HEAD = struct.Struct(">hiiq")  # version, snapshot/leader epoch, start
_BATCH = struct.Struct(">qqbh")
StateBatch = tuple[int, int, int, int]  # first, last, delivery state, delivery count


@dataclass
class ShareRecord:
    kind: int  # SNAPSHOT or UPDATE
    snapshot_epoch: int
    start: int  # -1 in an update that leaves the start offset as it was
    batches: list[StateBatch]
    state_epoch: int = 0
    create_ms: int = 0
    write_ms: int = 0


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: the string the state partition is hashed from."""
    from ..log.datadir import uuid_b64
    return f"{group_id}:{uuid_b64(topic_id)}:{partition}"


def encode_key(kind: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    raw = group_id.encode()
    return struct.pack(">hh", kind, len(raw)) + raw + _KEY_TAIL.pack(topic_id.bytes, partition)


def decode_key(data: bytes) -> tuple[int, str, uuid.UUID, int] | None:
    """(record type, group, topic id, partition); None for a record type of another kind."""
    kind, n = struct.unpack_from(">hh", data)
    if kind not in (SNAPSHOT, UPDATE):
        return None
    tid, partition = _KEY_TAIL.unpack_from(data, 4 + n)
    return kind, data[4:4 + n].decode(), uuid.UUID(bytes=tid), partition


def _batches(batches: list[StateBatch]) -> bytes:
    # A compact array (length + 1), each element with its (empty) tagged fields.
    return uvarint(len(batches) + 1) + b"".join(
        _BATCH.pack(f, last, st, c) + b"\x00" for f, last, st, c in batches) + b"\x00"


def encode_value(r: ShareRecord) -> bytes:
    if r.kind == SNAPSHOT:
        head = _SNAP_HEAD.pack(0, r.snapshot_epoch, r.state_epoch, 0, r.start, r.create_ms,
                               r.write_ms)
    else:
        head = _UPDATE_HEAD.pack(0, r.snapshot_epoch, 0, r.start)
    return head + _batches(r.batches)


def decode_value(kind: int, data: bytes) -> ShareRecord:
    """Raises ValueError for a value version this code does not know."""
    if struct.unpack_from(">h", data)[0] != 0:
        raise ValueError("unknown share state value version")
    if kind == SNAPSHOT:
        _, epoch, state_epoch, _, start, created, written = _SNAP_HEAD.unpack_from(data)
        pos = _SNAP_HEAD.size
    else:
        _, epoch, _, start = _UPDATE_HEAD.unpack_from(data)
        state_epoch = created = written = 0
        pos = _UPDATE_HEAD.size
    n, pos = read_uvarint(data, pos)
    batches = []
    for _ in range(n - 1):
        batches.append(_BATCH.unpack_from(data, pos))
        pos += _BATCH.size
        tags = data[pos]
        pos += 1
        if tags:
            raise ValueError("tagged fields in a state batch are not expected")
    return ShareRecord(kind, epoch, start, batches, state_epoch, created, written)


def overlay(spans: list[StateBatch], updates: list[StateBatch]) -> list[StateBatch]:
    """`spans` with the offsets each update covers replaced by it (sorted, disjoint)."""
    for uf, ul, ust, uc in updates:
        kept: list[StateBatch] = []
        for f, last, st, c in spans:
            if last < uf or f > ul:
                kept.append((f, last, st, c))
                continue
            if f < uf:
                kept.append((f, uf - 1, st, c))
            if last > ul:
                kept.append((ul + 1, last, st, c))
        kept.append((uf, ul, ust, uc))
        spans = sorted(kept)
    return spans


def delta(old: list[StateBatch], new: list[StateBatch]) -> list[StateBatch]:
    """The parts of `new` whose state or delivery count differ from `old` (both sorted and
    disjoint): what an update must carry so that overlay(old, it) gives `new` from `new`'s
    first offset on. One pass over both."""
    out: list[StateBatch] = []
    i = 0
    for f, last, st, c in new:
        pos = f
        while pos <= last:
            while i < len(old) and old[i][1] < pos:
                i += 1
            if i < len(old) and old[i][0] <= pos:
                o_last = min(old[i][1], last)
                if (old[i][2], old[i][3]) != (st, c):
                    out.append((pos, o_last, st, c))
                pos = o_last + 1
            else:
                gap_last = min(last, old[i][0] - 1) if i < len(old) else last
                out.append((pos, gap_last, st, c))
                pos = gap_last + 1
    merged: list[StateBatch] = []
    for b in out:
        if merged and merged[-1][1] + 1 == b[0] and merged[-1][2:] == b[2:]:
            merged[-1] = (merged[-1][0], b[1], b[2], b[3])
        else:
            merged.append(b)
    return merged


def trim(spans: list[StateBatch], start: int) -> list[StateBatch]:
    """The spans at or above `start` (a span across it is cut)."""
    return [(max(f, start), last, st, c) for f, last, st, c in spans if last >= start]


class ShareStateLog(OffsetsLog):
    """The offsets log's topic machinery on __share_group_state."""

    def __init__(self, logs: Any, create_topic: Callable[..., Any], num_partitions: int,
                 segment_bytes: int, notify: Callable[[str, int], None] | None = None):
        super().__init__(logs, create_topic, num_partitions, notify, name=TOPIC,
                         topic_configs={"cleanup.policy": "delete",
                                        "segment.bytes": str(segment_bytes)})

    def partition_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition),
                             self.num_partitions)

    def prune(self, partition: int, offset: int) -> None:
        """Start the state partition at `offset` (everything below it superseded)."""
        p = self.ensure_topic().partitions[partition]
        if p.log_start_offset < offset <= p.high_watermark:
            p.delete_records(offset)
