# Compaction of __consumer_offsets for the group coordinator (groups_coordinator.py): when a
# partition of the topic holds many more records than are live, it is rewritten with only
# the live ones: each classic group's metadata and committed offsets, and the records the
# KIP-848 consumer groups and KIP-932 share groups last wrote (their `written` maps). A
# partition with an open transaction's offsets is left alone (the snapshot would drop them).
from __future__ import annotations

import logging
from typing import Any

from .groups import Group, GroupState
from .offsets_log import Record
from .offsets_records import group_key, group_value, offset_key, offset_value

log = logging.getLogger("kafkalite.coordinator")


def compact(coord: Any, now_ms: int) -> None:
    """Compact the partitions of `coord.store` (OffsetsLog) that need it."""
    store = coord.store
    candidates = store.compaction_candidates()
    if not candidates:
        return
    by_partition: dict[int, list[Group]] = {p: [] for p in candidates}
    for g in coord.groups.values():
        p = store.partition_for(g.group_id)
        if p in by_partition:
            by_partition[p].append(g)
    modern: dict[int, list[Record]] = {}  # consumer and share groups: what they wrote
    for mg in [*coord.consumer_groups.values(), *coord.share_groups()]:
        modern.setdefault(store.partition_for(mg.group_id), []).extend(mg.written.items())
    for p, groups in by_partition.items():
        if any(g.pending_txn for g in groups):
            continue
        live = sum(len(g.offsets) + 1 for g in groups) + len(modern.get(p, ()))
        if not store.needs_compaction(p, live):
            continue
        records: list[Record] = list(modern.get(p, ()))
        for g in groups:
            if g.generation > 0 or g.protocol_type is not None:
                stable = {m.member_id: m.assignment for m in g.members.values()} \
                    if g.is_(GroupState.STABLE) else None
                records.append((group_key(g.group_id),
                                group_value(coord.group_value(g, stable))))
            records += [(offset_key(g.group_id, t, part), offset_value(o))
                        for (t, part), o in g.offsets.items()]
        try:
            store.compact(p, records, now_ms)
        except (OSError, ValueError) as e:
            log.warning("Compaction of partition %d of the offsets topic failed: %s", p, e)
