# The share coordinator's durable side (Kafka's ShareCoordinatorShard), sans sockets: what
# __share_group_state holds for each share-partition, written as ShareSnapshot/ShareUpdate
# records (share_state_log.py) and replayed when the broker starts (ShareCoordinator.open).
#
# A share-partition's first write is a snapshot; later writes are updates carrying only the
# state batches that differ from what was last written (and the start offset when it
# moved), until share.coordinator.snapshot.update.records.per.snapshot updates have been
# written since the last snapshot: then a snapshot again (0: every write is a snapshot), as
# Kafka. After each write, a state partition's log starts at the oldest snapshot any of its
# share-partitions still needs, so replay reads at most one snapshot and its updates per
# share-partition. Writes happen on the event loop (local appends, as the offsets log); the
# caller awaits `durable(partitions)` (fsync under kafkalite.fsync.before.ack) before it
# answers.
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Iterator

from .share_state_log import (SNAPSHOT, UPDATE, ShareRecord, ShareStateLog, StateBatch,
                              decode_key, decode_value, delta, encode_key, encode_value, overlay,
                              trim)

log = logging.getLogger("kafkalite.groups")
PKey = tuple[str, str, int]  # (group, topic name, partition)


@dataclass
class Persisted:
    topic_id: uuid.UUID
    partition: int  # in __share_group_state
    start: int
    spans: list[StateBatch] = field(default_factory=list)
    snapshot_epoch: int = 0
    state_epoch: int = 0
    updates: int = 0  # since the last snapshot
    snapshot_offset: int = 0  # where the last snapshot's batch starts in its partition
    create_ms: int = 0


class ShareStore:
    def __init__(self, state_log: ShareStateLog, topic_id_of: Callable[[str], uuid.UUID | None],
                 topic_name_of: Callable[[uuid.UUID], str | None],
                 durable: Callable[[set[int]], Awaitable[None]], per_snapshot: int):
        self.log = state_log
        self.topic_id_of = topic_id_of
        self.topic_name_of = topic_name_of
        self.durable = durable
        self.per_snapshot = per_snapshot
        self.state: dict[PKey, Persisted] = {}
        self.replayed = 0

    # --- replay ---------------------------------------------------------------------------

    def load(self) -> None:
        """Replay every state partition at once (records of deleted topics are skipped)."""
        for _ in self.replay():
            pass

    def replay(self) -> Iterator[None]:
        """Replay every state partition, yielding between chunks so that a caller on the
        event loop can give other work a turn."""
        t = self.log.topic()
        if t is None:
            return
        for partition in range(len(t.partitions)):
            for r in self.log.replay(partition):
                if r is None:
                    yield None
                    continue
                if r.key is None:
                    continue
                self.replayed += 1
                try:
                    self._apply(partition, r.key, r.value, r.offset)
                except (ValueError, IndexError, UnicodeDecodeError) as e:
                    log.warning("Skipping a bad %s record at offset %d: %s",
                                t.name, r.offset, e)
            yield None

    def _apply(self, state_partition: int, key: bytes, value: bytes | None, offset: int
               ) -> None:
        k = decode_key(key)
        if k is None:
            return
        kind, group, tid, partition = k
        name = self.topic_name_of(tid)
        if name is None:
            return
        pkey = (group, name, partition)
        if value is None:  # a tombstone: the share-partition's state was deleted
            self.state.pop(pkey, None)
            return
        rec = decode_value(kind, value)
        cur = self.state.get(pkey)
        if kind == SNAPSHOT:
            self.state[pkey] = Persisted(tid, state_partition, rec.start, trim(rec.batches, rec.start),
                                         rec.snapshot_epoch, rec.state_epoch, 0, offset,
                                         rec.create_ms)
        elif cur is not None:
            start = cur.start if rec.start < 0 else rec.start
            cur.spans = trim(overlay(cur.spans, rec.batches), start)
            cur.start = start
            cur.updates += 1

    # --- writes ---------------------------------------------------------------------------

    def write(self, changes: list[tuple[PKey, int, list[StateBatch]]], now_ms: int
              ) -> set[int]:
        """Append a snapshot or an update for each changed share-partition (one batch per
        state partition); returns the state partitions written. Raises StorageError."""
        by_partition: dict[int, list[tuple[PKey, Persisted, ShareRecord]]] = {}
        spans_by_key = {pkey: spans for pkey, _s, spans in changes}
        for pkey, start, spans in changes:
            group, topic, partition = pkey
            cur = self.state.get(pkey)
            tid = cur.topic_id if cur is not None else self.topic_id_of(topic)
            if tid is None:
                continue
            rec = self._record(cur, start, spans, now_ms)
            if rec is None:
                continue
            if cur is None:
                cur = Persisted(tid, self.log.partition_of(group, tid, partition), start,
                                create_ms=now_ms)
            by_partition.setdefault(cur.partition, []).append((pkey, cur, rec))
        for sp, items in by_partition.items():
            base = self.log.append_to(sp, [
                (encode_key(rec.kind, pkey[0], cur.topic_id, pkey[2]), encode_value(rec))
                for pkey, cur, rec in items], now_ms)
            for pkey, cur, rec in items:
                if rec.kind == SNAPSHOT:
                    cur.snapshot_epoch, cur.updates, cur.snapshot_offset = (
                        rec.snapshot_epoch, 0, base)
                else:
                    cur.updates += 1
                cur.start = rec.start if rec.start >= 0 else cur.start
                cur.spans = spans_by_key[pkey]
                self.state[pkey] = cur
            self._prune(sp)
        return set(by_partition)

    def _record(self, cur: Persisted | None, start: int, spans: list[StateBatch],
                now_ms: int) -> ShareRecord | None:
        if cur is None or cur.updates >= self.per_snapshot:
            epoch = 0 if cur is None else cur.snapshot_epoch + 1
            return ShareRecord(SNAPSHOT, epoch, start, spans,
                               0 if cur is None else cur.state_epoch,
                               now_ms if cur is None else cur.create_ms, now_ms)
        changed = delta(cur.spans, spans)
        if not changed and start == cur.start:
            return None
        return ShareRecord(UPDATE, cur.snapshot_epoch, start if start != cur.start else -1,
                           changed)

    def _prune(self, partition: int) -> None:
        needed = [cur.snapshot_offset for cur in self.state.values()
                  if cur.partition == partition]
        if needed:
            self.log.prune(partition, min(needed))

    async def initialize(self, pkey: PKey, topic_id: uuid.UUID, start: int, now_ms: int
                         ) -> None:
        """Start a share-partition afresh at `start` (AlterShareGroupOffsets): a snapshot
        with the next state epoch, as Kafka's InitializeShareGroupState writes."""
        cur = self.state.get(pkey)
        nxt = Persisted(topic_id, self.log.partition_of(pkey[0], topic_id, pkey[2]), start,
                        [], 0 if cur is None else cur.snapshot_epoch + 1,
                        0 if cur is None else cur.state_epoch + 1, create_ms=now_ms)
        rec = ShareRecord(SNAPSHOT, nxt.snapshot_epoch, start, [], nxt.state_epoch, now_ms,
                          now_ms)
        nxt.snapshot_offset = self.log.append_to(nxt.partition, [(
            encode_key(SNAPSHOT, pkey[0], topic_id, pkey[2]), encode_value(rec))], now_ms)
        self.state[pkey] = nxt
        self._prune(nxt.partition)
        await self.durable({nxt.partition})

    async def delete(self, pkeys: list[PKey], now_ms: int) -> None:
        """Forget share-partitions' state (DeleteShareGroupOffsets, DeleteGroups): a
        tombstone per key, so that replay drops what came before."""
        by_partition: dict[int, list] = {}
        for pkey in pkeys:
            cur = self.state.pop(pkey, None)
            if cur is not None:
                by_partition.setdefault(cur.partition, []).append(
                    (encode_key(SNAPSHOT, pkey[0], cur.topic_id, pkey[2]), None))
        for partition, records in by_partition.items():
            self.log.append_to(partition, records, now_ms)
            self._prune(partition)
        if by_partition:
            await self.durable(set(by_partition))

    def forget(self, drop: Callable[[PKey], bool]) -> None:
        """Stop tracking share-partitions (their topic was deleted: replay skips them)."""
        for pkey in [k for k in self.state if drop(k)]:
            del self.state[pkey]

    def drop_stale(self) -> None:
        """Forget the state of topics deleted (or recreated under their name) since it was
        replayed."""
        stale = [k for k, cur in self.state.items() if self.topic_id_of(k[1]) != cur.topic_id]
        for pkey in stale:
            del self.state[pkey]

    async def persist(self, changes: list[tuple[PKey, int, list[StateBatch]]], now_ms: int,
                      ) -> None:
        written = self.write(changes, now_ms)
        if written:
            await self.durable(written)

