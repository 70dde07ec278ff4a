# Transactional offsets (TxnOffsetCommit) in the group coordinator, driven directly on a real
# offsets log in a temporary directory (as test_groups_timers.py builds it): pending offsets
# are invisible and reported unstable, a COMMIT marker (the marker writer's listener call)
# makes them visible, an ABORT drops them, a plain commit written later is not overwritten,
# and a reload rebuilds the same state from the log: records of a transactional batch are
# pending until their producer's control batch in the same partition.
from __future__ import annotations

import struct

import crc32c
import pytest
from kio.schema.errors import ErrorCode as E

from kafkalite.coordinator.groups import CommittedOffset
from kafkalite.coordinator.offsets_log import TOPIC, transactional_batch
from kafkalite.wire.records import parse_header
from tests.unit.test_groups_timers import Harness

PID, EPOCH = 4000, 3
TP = ("t", 0)


def offset(n: int, metadata: str = "") -> CommittedOffset:
    return CommittedOffset(n, -1, metadata, 1000)


def txn_commit(h: Harness, n: int, *, group: str = "g", pid: int = PID, member: str = "",
               generation: int = -1, tp: tuple[str, int] = TP) -> E:
    result = h.coord.txn_offset_commit("tx", group, pid, EPOCH, member, generation, None,
                                       {tp: offset(n)})
    return result[tp]


def write_marker(h: Harness, commit: bool, *, pid: int = PID, group: str = "g") -> None:
    """What TX-B's write_markers does for __consumer_offsets: a control batch (Kafka's
    EndTransactionMarker) in the group's partition, then the listener call."""
    store = h.coord.store
    partition = store.partition_for(group)
    batch = bytearray(transactional_batch([(struct.pack(">hh", 0, int(commit)),
                                            struct.pack(">hi", 0, 0))], 1000, pid, EPOCH))
    struct.pack_into(">h", batch, 21, 0x30)  # transactional + control
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    p = store.ensure_topic().partitions[partition]
    p.append(bytes(batch), parse_header(bytes(batch)), 1000)
    h.coord.on_txn_marker(TOPIC, partition, pid, commit)


def committed(h: Harness, group: str = "g") -> int | None:
    err, entries = h.coord.fetch_offsets(group, [TP])
    assert err == E.none
    o = entries[0][1]
    return None if o is None else o.offset


def reload(h: Harness, tmp_path) -> Harness:
    """A restart: the coordinator replays the same offsets log."""
    h.close()
    h.close = lambda: None  # the fixture's teardown must not close it twice
    return Harness(tmp_path)


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def test_pending_offsets_are_invisible_and_unstable_until_commit(h):
    assert txn_commit(h, 5) == E.none
    assert committed(h) is None
    assert h.coord.unstable_offsets("g", [TP, ("t", 1)]) == {TP}
    write_marker(h, commit=True)
    assert committed(h) == 5
    assert h.coord.unstable_offsets("g", [TP]) == set()


def test_the_batch_is_transactional_with_the_producers_id_and_epoch(h):
    txn_commit(h, 5)
    p = h.coord.store.topic().partitions[h.coord.store.partition_for("g")]
    hdr = parse_header(p.read(0, 1 << 20))
    assert hdr.attributes & 0x30 == 0x10
    assert (hdr.producer_id, hdr.producer_epoch, hdr.base_sequence) == (PID, EPOCH, 0)


def test_abort_drops_pending_offsets_and_keeps_the_committed_one(h):
    h.coord.commit_offsets("g", "", None, -1, {TP: offset(2)})
    txn_commit(h, 5)
    assert committed(h) == 2
    write_marker(h, commit=False)
    assert committed(h) == 2
    assert h.coord.unstable_offsets("g", [TP]) == set()


def test_a_plain_commit_written_after_the_transactions_record_wins(h):
    txn_commit(h, 5)
    h.coord.commit_offsets("g", "", None, -1, {TP: offset(9)})
    write_marker(h, commit=True)
    assert committed(h) == 9


def test_markers_of_other_producers_or_partitions_settle_nothing(h):
    txn_commit(h, 5)
    write_marker(h, commit=True, pid=PID + 1)
    h.coord.on_txn_marker("other-topic", h.coord.store.partition_for("g"), PID, True)
    assert committed(h) is None and h.coord.unstable_offsets("g", [TP]) == {TP}


def test_two_producers_pending_in_one_group_settle_separately(h):
    txn_commit(h, 5, pid=1)
    txn_commit(h, 6, pid=2, tp=("t", 1))
    write_marker(h, commit=False, pid=1)
    assert h.coord.unstable_offsets("g", [TP, ("t", 1)]) == {("t", 1)}
    write_marker(h, commit=True, pid=2)
    assert h.coord.fetch_offsets("g", [("t", 1)])[1][0][1].offset == 6


def test_an_empty_group_with_only_pending_offsets_does_not_expire(h):
    txn_commit(h, 5)
    h.coord.offsets.expire(h.coord.wall_ms() + 10 ** 12)
    assert "g" in h.coord.groups
    write_marker(h, commit=False)
    h.coord.offsets.expire(h.coord.wall_ms())
    assert "g" not in h.coord.groups  # aborted and nothing committed: the group dies


def test_reload_keeps_an_open_transactions_offsets_pending(h, tmp_path):
    h.coord.commit_offsets("g", "", None, -1, {TP: offset(2)})
    txn_commit(h, 5)
    h2 = reload(h, tmp_path)
    try:
        assert committed(h2) == 2
        assert h2.coord.unstable_offsets("g", [TP]) == {TP}
        write_marker(h2, commit=True)
        assert committed(h2) == 5
    finally:
        h2.close()


@pytest.mark.parametrize("commit, expected", [(True, 5), (False, 2)])
def test_reload_applies_markers_found_in_the_log(h, tmp_path, commit, expected):
    h.coord.commit_offsets("g", "", None, -1, {TP: offset(2)})
    txn_commit(h, 5)
    txn_commit(h, 7, pid=PID + 1, group="other")  # still open at the reload
    write_marker(h, commit=commit)
    h2 = reload(h, tmp_path)
    try:
        assert committed(h2) == expected
        assert h2.coord.unstable_offsets("g", [TP]) == set()
        assert h2.coord.unstable_offsets("other", [TP]) == {TP}
    finally:
        h2.close()


def test_reload_keeps_a_plain_commit_written_after_a_committed_transaction(h, tmp_path):
    txn_commit(h, 5)
    h.coord.commit_offsets("g", "", None, -1, {TP: offset(9)})
    write_marker(h, commit=True)
    h2 = reload(h, tmp_path)
    try:
        assert committed(h2) == 9
    finally:
        h2.close()


def test_group_id_and_metadata_checks(h):
    assert txn_commit(h, 1, group="") == E.invalid_group_id
    big = {TP: offset(1, "x" * 5000)}
    assert h.coord.txn_offset_commit("tx", "g", PID, EPOCH, "", -1, None, big) == \
        {TP: E.offset_metadata_too_large}
    h.coord.loading = True
    assert txn_commit(h, 1) == E.coordinator_load_in_progress


async def test_member_checks_apply_only_when_a_member_is_named(h):
    (r,) = h.stable("g", 1)
    assert txn_commit(h, 1, member=r.member_id, generation=r.generation) == E.none
    assert txn_commit(h, 1, member=r.member_id, generation=r.generation + 1) == \
        E.illegal_generation
    assert txn_commit(h, 1, member="nobody", generation=r.generation) == E.unknown_member_id
    # TxnOffsetCommit v0-2 name no member: accepted whatever the group's state, unlike
    # OffsetCommit, which answers UNKNOWN_MEMBER_ID to a non-member of a Stable group.
    assert txn_commit(h, 1) == E.none
    assert h.coord.commit_offsets("g", "", None, -1, {TP: offset(1)}) == \
        {TP: E.unknown_member_id}
