# Transactional offset commits (TxnOffsetCommit), as Kafka's classic coordinator keeps them
# (GroupCoordinator.handleTxnCommitOffsets, GroupMetadata's pendingTransactionalOffsetCommits,
# GroupMetadataManager.handleTxnCompletion and the loader's pendingOffsets).
#
# A TxnOffsetCommit is validated like an OffsetCommit, except that the member check only
# applies when the request names a member, a generation or an instance id (v0-2 send none:
# then any group state is accepted), and the commit is no heartbeat. The offsets are written
# to the group's __consumer_offsets partition as a transactional batch of the producer and
# held pending, per group and producer id, invisible to OffsetFetch (which answers
# UNSTABLE_OFFSET_COMMIT for them when require_stable is set). The transaction's marker on
# that partition settles them: COMMIT moves each into the committed offsets unless a commit
# written later to the log is already there; ABORT drops them. The loader rebuilds the same
# state from the log: records of a transactional batch are pending until their producer's
# next marker in that partition.
from __future__ import annotations

import logging

from ..wire.errors import ErrorCode
from .groups import CommittedOffset, Group, GroupState, validate_member
from .groups_registry import GroupRegistry, store_error
from .offsets import TP, java_length
from .offsets_log import TOPIC
from .offsets_records import offset_key, offset_value

log = logging.getLogger("kafkalite.coordinator")

S = GroupState
E = ErrorCode


def merge_committed(committed: dict[TP, CommittedOffset],
                    pending: dict[TP, CommittedOffset]) -> None:
    """Kafka's completePendingTxnOffsetCommit on COMMIT: a pending offset replaces the
    committed one only if its batch is later in the log."""
    for tp, o in pending.items():
        current = committed.get(tp)
        if current is None or current.log_offset < o.log_offset:
            committed[tp] = o


class TxnOffsets:
    def __init__(self, coord: GroupRegistry):
        self.coord = coord
        # producer id -> ids of the groups holding its pending offsets (openGroupsForProducer)
        self.open_groups: dict[int, set[str]] = {}

    def commit(self, transactional_id: str, group_id: str, producer_id: int,
               producer_epoch: int, member_id: str, generation: int,
               group_instance_id: str | None, offsets: dict[TP, CommittedOffset]
               ) -> dict[TP, ErrorCode]:
        c = self.coord
        err = c.check_status(group_id, allow_empty_id=False)
        if err is not None:
            return dict.fromkeys(offsets, err)
        group = c.groups.get(group_id)
        if group is None:
            group = c.add_group(group_id)
        err = self._validate(group, member_id, group_instance_id, generation)
        if err is not None:
            return dict.fromkeys(offsets, err)
        result: dict[TP, ErrorCode] = {}
        valid: dict[TP, CommittedOffset] = {}
        for tp, o in offsets.items():
            if java_length(o.metadata) > c.metadata_max_bytes:
                result[tp] = E.offset_metadata_too_large
            else:
                valid[tp] = o
        if not valid:
            return result
        records = [(offset_key(group_id, t, p), offset_value(o)) for (t, p), o in valid.items()]
        try:
            base = c.store.append_txn(group_id, records, c.wall_ms(), producer_id,
                                      producer_epoch)
        except (OSError, ValueError) as e:
            log.warning("Transactional offset commit of group %s (%s) failed: %s", group_id,
                        transactional_id, e)
            code = E.invalid_commit_offset_size if isinstance(e, ValueError) \
                else store_error(e).code
            result.update(dict.fromkeys(valid, code))
            return result
        pending = group.pending_txn.setdefault(producer_id, {})
        for tp, o in valid.items():
            o.log_offset = base
            pending[tp] = o
        self.open_groups.setdefault(producer_id, set()).add(group_id)
        result.update(dict.fromkeys(valid, E.none))
        return result

    @staticmethod
    def _validate(group: Group, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode | None:
        """Kafka's validateOffsetCommit with isTransactional: no member, no generation and
        no instance id (TxnOffsetCommit v0-2) pass whatever the group's state."""
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation < 0 and group.is_(S.EMPTY):
            return None
        if generation >= 0 or member_id or instance_id is not None:
            err = validate_member(group, member_id, instance_id)
            if err is None and generation != group.generation:
                err = E.illegal_generation
            return err
        return None

    def complete(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended with a marker on `partition` of the offsets
        topic: settle the pending offsets of the groups that live there."""
        gids = self.open_groups.get(producer_id)
        if not gids:
            return
        store = self.coord.store
        done = {g for g in gids if store.partition_for(g) == partition}
        gids -= done
        if not gids:
            del self.open_groups[producer_id]
        for gid in done:
            group = self.coord.groups.get(gid)
            pending = group.pending_txn.pop(producer_id, None) if group is not None else None
            if pending and commit:
                merge_committed(group.offsets, pending)  # type: ignore[union-attr]
            if pending:
                log.debug("%s %d pending offsets of group %s (producer %d)",
                          "Committed" if commit else "Aborted", len(pending), gid, producer_id)

    def restore(self, group: Group, pending: dict[int, dict[TP, CommittedOffset]]) -> None:
        """Pending offsets found at load (transactions without a marker yet)."""
        for pid, offsets in pending.items():
            if offsets:
                group.pending_txn[pid] = offsets
                self.open_groups.setdefault(pid, set()).add(group.group_id)

    @staticmethod
    def unstable(group: Group | None, partitions: list[TP]) -> set[TP]:
        """Partitions among `partitions` with offsets pending in an open transaction."""
        if group is None or not group.pending_txn:
            return set()
        wanted = set(partitions)
        return {tp for offsets in group.pending_txn.values() for tp in offsets if tp in wanted}


__all__ = ["TxnOffsets", "merge_committed", "TOPIC"]
