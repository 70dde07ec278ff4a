# KIP-932 share-group membership in __consumer_offsets, laid out as Kafka's group coordinator
# writes it (group-coordinator's ShareGroup*Key/Value.json), beside the KIP-848 records
# (consumer_group_records.py, whose key layout and flexible-value helpers these share):
#   key 9  ShareGroupPartitionMetadata          group         value: topics[id, name,
#                                                             numPartitions, partitionMetadata[]]
#   key 10 ShareGroupMemberMetadata             group, member value: rackId?, clientId,
#                                                             clientHost, subscribedTopicNames[]
#   key 11 ShareGroupMetadata                   group         value: epoch, metadataHash
#   key 12 ShareGroupTargetAssignmentMetadata   group         value: assignmentEpoch
#   key 13 ShareGroupTargetAssignmentMember     group, member value: topicPartitions[id, parts]
#   key 14 ShareGroupCurrentMemberAssignment    group, member value: memberEpoch,
#          previousMemberEpoch, state (int8, always 0: share members revoke nothing),
#          assignedPartitions[id, parts]
# metadataHash is written 0: kafkalite keeps the subscribed topics' partition counts in the
# key 9 record (as Kafka 4.0 did) instead of Kafka 4.1's hash of the topics' metadata.
#
# ShareGroupStore writes what a change of a share group changed (through the offsets store,
# as ConsumerGroupStore, whose diffing it reuses); ShareGroupLoader collects the replayed
# records and rebuilds the groups (a group without its key 11 record is not restored).
from __future__ import annotations

import struct
from typing import Any, Iterable

from . import consumer_group_records as R
from .consumer_group_records import _B, _I, _NO_TAGS, _V0, Ids, Names, _cstr, _Reader
from .consumer_group_store import ConsumerGroupLoader, ConsumerGroupStore, topic_ids
from .share_group import ShareGroup, ShareMember
from ..wire.primitives import uvarint as _uvarint

PARTITIONS, MEMBER, GROUP, TARGET, TARGET_MEMBER, CURRENT = 9, 10, 11, 12, 13, 14
KINDS = frozenset(range(PARTITIONS, CURRENT + 1))
_MEMBER_KINDS = (MEMBER, TARGET_MEMBER, CURRENT)
_Q = struct.Struct(">q")


def parse_key(buf: bytes) -> tuple[int, str, str | None]:
    return R.parse_key(buf, KINDS, _MEMBER_KINDS)


def group_value(epoch: int) -> bytes:
    return _V0 + _I.pack(epoch) + _Q.pack(0) + _NO_TAGS


def partitions_value(sizes: dict[str, int], ids: Ids) -> bytes:
    rows = [tid.bytes + _cstr(t) + _I.pack(n) + b"\x01" + _NO_TAGS  # no rack data
            for t, n in sorted(sizes.items()) if (tid := ids(t)) is not None]
    return _V0 + _uvarint(len(rows) + 1) + b"".join(rows) + _NO_TAGS


def member_value(m: ShareMember) -> bytes:
    names = b"".join(_cstr(n) for n in m.topics)
    return (_V0 + _cstr(m.rack) + _cstr(m.client_id) + _cstr(m.client_host)
            + _uvarint(len(m.topics) + 1) + names + _NO_TAGS)


def current_value(m: ShareMember, ids: Ids) -> bytes:
    return (_V0 + _I.pack(m.epoch) + _I.pack(m.previous_epoch) + _B.pack(0)
            + R._topics(m.assignment, ids) + _NO_TAGS)  # type: ignore[arg-type]


def parse_member(buf: bytes, m: ShareMember) -> None:
    r = _Reader(buf)
    m.rack, m.client_id, m.client_host = r.str(), r.str() or "", r.str() or ""
    m.topics = tuple(sorted(r.str() or "" for _ in range(r.uvarint() - 1)))


def _tuples(a: dict[str, frozenset[int]]) -> dict[str, tuple[int, ...]]:
    return {t: tuple(sorted(ps)) for t, ps in a.items()}


def parse_current(buf: bytes, m: ShareMember, names: Names) -> None:
    r = _Reader(buf)
    m.epoch, m.previous_epoch = r.fixed(_I), r.fixed(_I)
    r.fixed(_B)
    m.assignment = _tuples(r.topics(names))


def member_keys(group_id: str, member_id: str) -> Iterable[bytes]:
    """A leaving member's keys, in the order Kafka tombstones them."""
    return (R.key(CURRENT, group_id, member_id), R.key(TARGET_MEMBER, group_id, member_id),
            R.key(MEMBER, group_id, member_id))


def group_keys(group_id: str) -> Iterable[bytes]:
    return (R.key(TARGET, group_id), R.key(PARTITIONS, group_id), R.key(GROUP, group_id))


class ShareGroupStore(ConsumerGroupStore):
    def sync(self, group: ShareGroup, touched: str | None = None) -> None:  # type: ignore[override]
        """Write what changed: the group's records, the target when the epoch moved, the
        member `touched` (every member when None), tombstones for members gone."""
        if self.store is None:
            return
        ids = topic_ids(self.store.logs)
        gid = group.group_id
        want: dict[bytes, bytes | None] = {
            R.key(PARTITIONS, gid): partitions_value(group.topic_sizes, ids),
            R.key(GROUP, gid): group_value(group.epoch)}
        target_key, target = R.key(TARGET, gid), R.target_value(group.epoch)
        if touched is None or group.written.get(target_key) != target:
            for mid, a in group.target.items():
                want[R.key(TARGET_MEMBER, gid, mid)] = R.target_member_value(
                    a, ids)  # type: ignore[arg-type]
        for m in (group.members.values() if touched is None else
                  [m for m in (group.members.get(touched),) if m is not None]):
            want[R.key(MEMBER, gid, m.member_id)] = member_value(m)
            want[R.key(CURRENT, gid, m.member_id)] = current_value(m, ids)
        want[target_key] = target
        for mid in group.written_members - group.members.keys():
            want.update(dict.fromkeys(member_keys(gid, mid)))
        self._write(group, want)  # type: ignore[arg-type]
        group.written_members = set(group.members)

    def delete(self, group: ShareGroup) -> None:  # type: ignore[override]
        if self.store is None:
            return
        want: dict[bytes, bytes | None] = {}
        for mid in group.written_members | group.members.keys():
            want.update(dict.fromkeys(member_keys(group.group_id, mid)))
        want.update(dict.fromkeys(group_keys(group.group_id)))
        self._write(group, want)  # type: ignore[arg-type]
        group.written_members = set()


class ShareGroupLoader(ConsumerGroupLoader):
    """Collects the share groups' records of the replay (keys 9-14); restore() rebuilds
    them into a ShareGroups' `groups`."""

    kind = "share"
    parse_key = staticmethod(parse_key)

    @staticmethod
    def _group(gid: str, records: dict[bytes, bytes], names: Any) -> ShareGroup | None:  # type: ignore[override]
        meta = records.get(R.key(GROUP, gid))
        if meta is None:
            return None  # deleted, or only partly written before a crash
        group = ShareGroup(gid, epoch=R.parse_epoch(meta))
        for k, v in records.items():
            kind, _, mid = parse_key(k)
            if kind == PARTITIONS:
                group.topic_sizes = R.parse_partitions(v, names, epoch=False)
            elif kind == MEMBER and mid is not None:
                parse_member(v, group.members.setdefault(mid, ShareMember(mid)))
            elif kind == TARGET_MEMBER and mid is not None:
                group.target[mid] = _tuples(R.parse_target_member(v, names))
        for k, v in records.items():
            kind, _, mid = parse_key(k)
            if kind == CURRENT and mid in group.members:
                parse_current(v, group.members[mid], names)
        group.target = {m: a for m, a in group.target.items() if m in group.members}
        group.written = dict(records)
        group.written_members = set(group.members)
        return group
