# KIP-848 groups in __consumer_offsets: what a change of a group writes, and the replay that
# brings the groups back at start (as Kafka 4.x: members keep their ids, epochs and
# assignments across a restart and go on heartbeating without a rebalance).
#
# Writes go through the offsets store (OffsetsLog.append, as offset commits: the flusher
# thread syncs the log, never the event loop). A group remembers the record it last wrote for
# each of its keys (ConsumerGroup.written); a change appends only the records whose value
# differs, and tombstones for the keys of members gone (current assignment, target, metadata
# in Kafka's order) or of a deleted group. A failed write is logged and the record stays
# unwritten, so the next change of the group writes it again.
#
# Replay: the loader (groups_coordinator.py's _Loader) hands every record of key versions 3-8
# here; the latest value per key wins, a tombstone drops the key; at the end each group with
# a ConsumerGroupMetadata record is rebuilt (topics resolved from their ids; a topic deleted
# meanwhile is left out). Session timers of restored members are armed by the coordinator.
from __future__ import annotations

import logging
import uuid
from typing import Any, Callable

from . import consumer_group_records as R
from .consumer_group import ConsumerGroup, ConsumerMember

log = logging.getLogger("kafkalite.coordinator")


def topic_ids(logs: Any) -> Callable[[str], uuid.UUID | None]:
    def ids(name: str) -> uuid.UUID | None:
        t = logs.get(name)
        return None if t is None else t.topic_id
    return ids


def topic_names(logs: Any) -> Callable[[uuid.UUID], str | None]:
    def names(tid: uuid.UUID) -> str | None:
        t = logs.by_id.get(tid)
        return None if t is None else t.name
    return names


class ConsumerGroupStore:
    def __init__(self, store: Any, wall_ms: Callable[[], int]):
        self.store = store  # OffsetsLog, or None (unit tests of the state machine)
        self.wall_ms = wall_ms

    def sync(self, group: ConsumerGroup, touched: str | None = None) -> None:
        """Write what changed in `group`: its own records, the target when its epoch moved,
        the member `touched` (every member when None), tombstones for members gone."""
        if self.store is None:
            return
        ids = topic_ids(self.store.logs)
        gid = group.group_id
        want: dict[bytes, bytes | None] = {
            R.key(R.GROUP, gid): R.group_value(group.epoch),
            R.key(R.PARTITIONS, gid): R.partitions_value(
                group.epoch, group.subscription_metadata, ids),
        }
        target_key = R.key(R.TARGET, gid)
        target = R.target_value(group.assignment_epoch)
        if touched is None or group.written.get(target_key) != target:
            for mid, a in group.target.items():
                want[R.key(R.TARGET_MEMBER, gid, mid)] = R.target_member_value(a, ids)
        members = group.members.values() if touched is None else \
            [m for m in (group.members.get(touched),) if m is not None]
        for m in members:
            want[R.key(R.MEMBER, gid, m.member_id)] = R.member_value(m)
            want[R.key(R.CURRENT, gid, m.member_id)] = R.current_value(m, ids)
        want[target_key] = target  # after its members, as Kafka orders them
        for mid in group.written_members - group.members.keys():
            want.update(dict.fromkeys(R.member_keys(gid, mid)))
        self._write(group, want)
        group.written_members = set(group.members)

    def delete(self, group: ConsumerGroup) -> None:
        """Tombstones for every key the group wrote."""
        if self.store is None:
            return
        want: dict[bytes, bytes | None] = {}
        for mid in group.written_members:
            want.update(dict.fromkeys(R.member_keys(group.group_id, mid)))
        want.update(dict.fromkeys(R.group_keys(group.group_id)))
        group.written = {k: b"" for k in want}  # so that each tombstone is written
        self._write(group, want)

    def _write(self, group: ConsumerGroup, want: dict[bytes, bytes | None]) -> None:
        written = group.written
        records = [(k, v) for k, v in want.items()
                   if (written.get(k) != v if v is not None else k in written)]
        if not records:
            return
        try:
            self.store.append(group.group_id, records, self.wall_ms())
        except (OSError, ValueError) as e:
            log.warning("Could not write %d records of consumer group %s: %s", len(records),
                        group.group_id, e)
            return
        for k, v in records:
            if v is None:
                written.pop(k, None)
            else:
                written[k] = v


class ConsumerGroupLoader:
    """Collects the KIP-848 records of the replay; restore() rebuilds the groups."""

    kind = "consumer"
    parse_key = staticmethod(R.parse_key)

    def __init__(self) -> None:
        self.records: dict[str, dict[bytes, bytes]] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        _, gid, _ = self.parse_key(key)
        if value is None:
            self.records.get(gid, {}).pop(key, None)
        else:
            self.records.setdefault(gid, {})[key] = value

    def restore(self, groups: dict[str, ConsumerGroup], logs: Any) -> int:
        """Put the replayed groups into `groups`; returns how many members came back."""
        names = topic_names(logs)
        n = 0
        for gid, records in self.records.items():
            try:
                group = self._group(gid, records, names)
            except (ValueError, IndexError, UnicodeDecodeError) as e:
                log.warning("Skipping %s group %s, its records are unreadable: %s",
                            self.kind, gid, e)
                continue
            if group is not None:
                groups[gid] = group
                n += len(group.members)
        self.records = {}
        return n

    @staticmethod
    def _group(gid: str, records: dict[bytes, bytes], names: Any) -> ConsumerGroup | None:
        meta = records.get(R.key(R.GROUP, gid))
        if meta is None:
            return None  # deleted, or only partly written before a crash
        group = ConsumerGroup(gid)
        group.epoch = R.parse_epoch(meta)
        for k, v in records.items():
            kind, _, mid = R.parse_key(k)
            if kind == R.PARTITIONS:
                group.subscription_metadata = R.parse_partitions(v, names)
            elif kind == R.TARGET:
                group.assignment_epoch = R.parse_epoch(v)
            elif kind == R.MEMBER and mid is not None:
                member = group.members.get(mid) or ConsumerMember(mid)
                group.add(R.parse_member(v, mid, member))
            elif kind == R.TARGET_MEMBER and mid is not None:
                group.target[mid] = R.parse_target_member(v, names)
        for k, v in records.items():
            kind, _, mid = R.parse_key(k)
            if kind == R.CURRENT and mid in group.members:
                R.parse_current(v, group.members[mid], names)
        group.target = {m: a for m, a in group.target.items() if m in group.members}
        group.written = dict(records)
        group.written_members = set(group.members)
        return group
