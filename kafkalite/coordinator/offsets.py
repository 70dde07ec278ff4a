# Committed offsets of consumer groups, as Kafka's classic coordinator handles them
# (GroupCoordinator.handleCommitOffsets/handleFetchOffsets/handleDeleteOffsets and
# GroupMetadataManager's storeOffsets and cleanupGroupMetadata).
#
# A commit is validated against the group (member, generation; a "simple" consumer with
# generation -1 may commit to an Empty group, creating it if needed), written to
# __consumer_offsets, and only then made visible. Metadata strings longer than
# offset.metadata.max.bytes (counted in UTF-16 code units, as Java's String.length) get
# OFFSET_METADATA_TOO_LARGE. Expiry: offsets of an Empty group expire offsets.retention.minutes
# after it became empty; of a Stable consumer group, the offsets of topics no member
# subscribes to expire that long after their commit; a retention_time sent with OffsetCommit
# v2-4 sets an explicit expiry. An Empty group without offsets then becomes Dead and is
# removed (with a tombstone for its metadata if it ever had a generation).
from __future__ import annotations

import logging
from typing import Callable

from ..wire.errors import ErrorCode
from .groups import CONSUMER_PROTOCOL, CommittedOffset, Group, GroupState, Member, validate_member
from .groups_registry import GroupRegistry, store_error
from .offsets_records import group_key, offset_key, offset_value

log = logging.getLogger("kafkalite.coordinator")

S = GroupState
E = ErrorCode
TP = tuple[str, int]


def java_length(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


class OffsetManager:
    def __init__(self, coord: GroupRegistry,
                 schedule_heartbeat: Callable[[Group, Member], None]):
        self.coord = coord
        # A commit from a member counts as a heartbeat, as in Kafka.
        self.schedule_heartbeat = schedule_heartbeat

    # --- OffsetCommit ---------------------------------------------------------------------

    def commit(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
               offsets: dict[TP, CommittedOffset]) -> dict[TP, ErrorCode]:
        c = self.coord
        err = c.check_status(group_id, allow_empty_id=True)
        if err is not None:
            return dict.fromkeys(offsets, err)
        group = c.groups.get(group_id)
        if group is None:
            if generation >= 0:  # from an older generation of a group that is gone
                return dict.fromkeys(offsets, E.illegal_generation)
            log.info("Creating simple consumer group %s via manual offset commit", group_id)
            group = c.add_group(group_id)
        err = self._validate(group, member_id, instance_id, generation)
        if err is not None:
            return dict.fromkeys(offsets, err)
        if group.is_(S.COMPLETING_REBALANCE):
            # A member with the new generation that has not synced yet: let it rejoin.
            return dict.fromkeys(offsets, E.rebalance_in_progress)
        if group.is_(S.STABLE, S.PREPARING_REBALANCE):
            self.schedule_heartbeat(group, group.members[member_id])
        return self._store(group, offsets)

    @staticmethod
    def _validate(group: Group, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode | None:
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation < 0 and group.is_(S.EMPTY):
            return None  # admin clients and consumers without group management
        if generation >= 0 or member_id or instance_id is not None:
            err = validate_member(group, member_id, instance_id)
            if err is None and generation != group.generation:
                err = E.illegal_generation
            return err
        return None if group.is_(S.EMPTY) else E.unknown_member_id

    def _store(self, group: Group, offsets: dict[TP, CommittedOffset]) -> dict[TP, ErrorCode]:
        limit = self.coord.metadata_max_bytes
        result: dict[TP, ErrorCode] = {}
        valid: dict[TP, CommittedOffset] = {}
        for tp, o in offsets.items():
            if java_length(o.metadata) > limit:
                result[tp] = E.offset_metadata_too_large
            else:
                valid[tp] = o
        if not valid:
            return result
        records = [(offset_key(group.group_id, t, p), offset_value(o))
                   for (t, p), o in valid.items()]
        try:
            base = self.coord.store.append(group.group_id, records, self.coord.wall_ms())
        except (OSError, ValueError) as e:
            se = store_error(e)
            log.warning("Offset commit of group %s failed: %s", group.group_id, e)
            result.update(dict.fromkeys(valid, se.code))
            return result
        for o in valid.values():
            o.log_offset = base  # a transaction committing later compares with it
        group.pending_commits += 1  # keeps an Empty group alive meanwhile, as Kafka's

        def settle(replicated: bool) -> None:  # visible once the ISR has them
            group.pending_commits -= 1
            if replicated and not group.is_(S.DEAD):
                group.offsets.update(valid)
        store = self.coord.store
        store.when_replicated(store.partition_for(group.group_id), settle)
        result.update(dict.fromkeys(valid, E.none))
        return result

    # --- OffsetFetch ----------------------------------------------------------------------

    def fetch(self, group_id: str, partitions: list[TP] | None
              ) -> tuple[ErrorCode, list[tuple[TP, CommittedOffset | None]]]:
        """Committed offsets of `partitions` (all the group has when None). Kafka answers
        regardless of the group's state: groups may use Kafka only to store offsets."""
        err = self.coord.check_status(group_id, allow_empty_id=True)
        if err is not None:
            return err, []
        group = self.coord.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.none, [(tp, None) for tp in partitions or ()]
        if partitions is None:
            return E.none, sorted(group.offsets.items())
        return E.none, [(tp, group.offsets.get(tp)) for tp in partitions]

    # --- OffsetDelete ---------------------------------------------------------------------

    def delete(self, group_id: str, partitions: list[TP]
               ) -> tuple[ErrorCode, dict[TP, ErrorCode]]:
        err = self.coord.check_status(group_id, allow_empty_id=True)
        if err is not None:
            return err, {}
        group = self.coord.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, {}
        result: dict[TP, ErrorCode] = {}
        if group.is_(S.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL:
            eligible = []
            for tp in partitions:
                if group.is_subscribed(tp[0]):
                    result[tp] = E.group_subscribed_to_topic
                else:
                    eligible.append(tp)
        else:
            return E.non_empty_group, {}
        if eligible:
            removed = {tp: group.offsets.pop(tp) for tp in eligible if tp in group.offsets}
            self.cleanup(group, removed)
            result.update(dict.fromkeys(eligible, E.none))
        return E.none, result

    # --- expiry and cleanup ---------------------------------------------------------------

    def expire(self, now_ms: int) -> int:
        retention = self.coord.retention_ms
        removed_total = 0
        for group in list(self.coord.groups.values()):
            expired = self._expired(group, now_ms, retention)
            removed = {tp: group.offsets.pop(tp) for tp in expired}
            removed_total += len(removed)
            self.cleanup(group, removed)
        if removed_total:
            log.info("Removed %d expired offsets", removed_total)
        return removed_total

    @staticmethod
    def _expired(group: Group, now_ms: int, retention_ms: int) -> list[TP]:
        if group.is_(S.EMPTY) and group.protocol_type is not None:
            base = group.state_ms
            skip: set[str] = set()
        elif group.protocol_type == CONSUMER_PROTOCOL and group.is_(S.STABLE) \
                and group.subscribed_topics is not None:
            base = None
            skip = group.subscribed_topics
        elif group.protocol_type is None:  # a simple consumer's group: by commit time
            base = None
            skip = set()
        else:
            return []
        out = []
        for tp, o in group.offsets.items():
            if tp[0] in skip:
                continue
            if o.expire_ms >= 0:
                if now_ms >= o.expire_ms:
                    out.append(tp)
            elif now_ms - (base if base is not None else o.commit_ms) >= retention_ms:
                out.append(tp)
        return out

    def remove_topic(self, topic: str) -> None:
        """A deleted topic takes its committed offsets with it, in every group."""
        for group in list(self.coord.groups.values()):
            removed = {tp: o for tp, o in group.offsets.items() if tp[0] == topic}
            for tp in removed:
                del group.offsets[tp]
            for pending in group.pending_txn.values():  # as Kafka's removeOffsets
                for tp in [tp for tp in pending if tp[0] == topic]:
                    del pending[tp]
            self.cleanup(group, removed)

    def cleanup(self, group: Group, removed: dict[TP, CommittedOffset]) -> None:
        """Tombstone removed offsets; an Empty group left without offsets (committed or
        pending in a transaction) dies."""
        c = self.coord
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group.group_id, t, p), None) for t, p in removed]
        if group.is_(S.EMPTY) and not group.offsets and not group.pending_txn \
                and not group.pending_commits:
            log.info("Group %s transitioned to Dead in generation %d", group.group_id,
                     group.generation)
            group.transition(S.DEAD, c.wall_ms())
        if group.is_(S.DEAD) and c.groups.get(group.group_id) is group:
            c.remove_group(group)
            if group.generation > 0:  # groups only used to store offsets have no metadata
                records.append((group_key(group.group_id), None))
        if records:
            try:
                c.store.append(group.group_id, records, c.wall_ms())
            except (OSError, ValueError) as e:
                # As Kafka: not fatal, the next cleanup or a compaction drops them anyway.
                log.warning("Could not write %d tombstones for group %s: %s", len(records),
                            group.group_id, e)
