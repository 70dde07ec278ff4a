# SharePartition (KIP-932 delivery state) and share-group membership, stepped with FakeClock.
from __future__ import annotations

import pytest

from kafkalite.clock import FakeClock
from kafkalite.coordinator.share_group import ShareGroupError, ShareGroups, assign
from kafkalite.coordinator.share_partition import (
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, GAP, REJECT, RELEASE,
    InvalidRecordState, SharePartition)
from kafkalite.wire.errors import ErrorCode as E

LOCK_MS, MAX_LOCKS, LIMIT = 30_000, 200, 3


def part(clock, start=0, max_locks=MAX_LOCKS):
    return SharePartition(clock, start, lambda: (LOCK_MS, max_locks, LIMIT))


def test_acquire_whole_batches_then_stop_at_max_records():
    sp = part(FakeClock())
    got = sp.acquire("a", [(0, 4), (5, 9), (10, 14)], max_records=6)
    assert got == [(0, 9, 1)]  # whole batches: the second passes 6, the third is not taken
    assert (sp.start, sp.end) == (0, 10)
    assert sp.next_fetch_offset() == 10
    assert sp.acquire("b", [(0, 4), (5, 9)], 10) == []  # held by "a"


def test_lock_expiry_redelivers_with_count_plus_one():
    clock = FakeClock()
    sp = part(clock)
    sp.acquire("a", [(0, 4)], 10)
    clock.advance(LOCK_MS - 1)
    assert sp.state_of(2) == (ACQUIRED, 1)
    clock.advance(1)
    assert sp.state_of(2) == (AVAILABLE, 1)
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", [(0, 4)], 10) == [(0, 4, 2)]
    with pytest.raises(InvalidRecordState):  # "a" lost its lock
        sp.acknowledge("a", [(0, 4, (ACCEPT,))])


def test_reject_archives_release_makes_available():
    sp = part(FakeClock())
    sp.acquire("a", [(0, 4)], 10)
    sp.acknowledge("a", [(1, 1, (REJECT,)), (2, 3, (RELEASE,))])
    assert sp.state_of(1) == (ARCHIVED, 1)
    assert sp.state_of(2) == sp.state_of(3) == (AVAILABLE, 1)
    assert sp.state_of(0) == sp.state_of(4) == (ACQUIRED, 1)
    assert sp.acquire("b", [(0, 4)], 10) == [(2, 3, 2)]  # only the released ones


def test_delivery_count_limit_archives():
    clock = FakeClock()
    sp = part(clock)
    for delivery in range(1, LIMIT + 1):
        assert sp.acquire("a", [(0, 0)], 10) == [(0, 0, delivery)]
        sp.acknowledge("a", [(0, 0, (RELEASE,))])
    # The third release reached the limit: archived, and the start offset moved past it.
    assert sp.state_of(0) is None and sp.start == 1
    assert sp.acquire("a", [(0, 0)], 10) == []
    sp.acquire("a", [(1, 1)], 10)
    clock.advance(LOCK_MS)  # lock expiry counts like a release
    sp.acquire("a", [(1, 1)], 10)
    clock.advance(LOCK_MS)
    sp.acquire("a", [(1, 1)], 10)
    clock.advance(LOCK_MS)
    assert sp.start == 2


def test_start_offset_advances_over_contiguous_done_prefix():
    sp = part(FakeClock())
    sp.acquire("a", [(0, 9)], 10)
    sp.acknowledge("a", [(0, 9, (ACCEPT, ACCEPT, REJECT, RELEASE, ACCEPT, GAP, ACCEPT,
                                 ACCEPT, ACCEPT, ACCEPT))])
    assert sp.start == 3  # 0-2 done, 3 released
    assert sp.state_of(3) == (AVAILABLE, 1)
    assert sp.state_of(4) == (ACKNOWLEDGED, 1) and sp.state_of(5) == (ARCHIVED, 1)
    sp.acquire("a", [(0, 9)], 10)
    sp.acknowledge("a", [(3, 3, (ACCEPT,))])
    assert (sp.start, sp.end, sp.spans) == (10, 10, [])


def test_bad_acknowledgement_changes_nothing():
    sp = part(FakeClock())
    sp.acquire("a", [(0, 4)], 10)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", [(0, 1, (ACCEPT,)), (3, 7, (ACCEPT,))])  # 5-7 never acquired
    assert sp.state_of(0) == (ACQUIRED, 1)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("b", [(0, 1, (ACCEPT,))])  # not the holder


def test_in_flight_window_limit_and_member_release():
    sp = part(FakeClock(), start=100, max_locks=100)
    sp.acquire("a", [(100, 199)], 1000)
    assert sp.next_fetch_offset() is None  # 100 records in flight: the window is full
    assert sp.acquire("b", [(200, 210)], 10) == []
    assert sp.release_member("a") == 100
    assert sp.acquire("b", [(100, 199)], 10) == [(100, 199, 2)]


def test_snapshot_turns_locks_into_available():
    sp = part(FakeClock())
    sp.acquire("a", [(0, 4), (5, 9)], 10)
    sp.acknowledge("a", [(0, 4, (ACCEPT,))])
    back = part(FakeClock())
    back.restore(*sp.snapshot())
    assert (back.start, back.end) == (5, 10)
    assert back.state_of(5) == (AVAILABLE, 1)


def test_assignor_shares_partitions_when_members_outnumber_them():
    members = {m: ("t",) for m in "abcd"}
    got = assign(members, {"t": 1})
    assert all(got[m] == {"t": (0,)} for m in "abcd")
    got = assign({m: ("t",) for m in "ab"}, {"t": 4})
    assert got == {"a": {"t": (0, 2)}, "b": {"t": (1, 3)}}


def test_membership_epochs_fencing_and_session_expiry():
    clock = FakeClock()
    gone = []
    groups = ShareGroups(clock, lambda t: {"t": 2}.get(t), lambda g: (45_000, 5_000), 3,
                         lambda g, m: gone.append(m))
    a, send = groups.heartbeat("g", "a", 0, None, ("t",))
    assert send and a.epoch == 1 and a.assignment == {"t": (0, 1)}
    b, _ = groups.heartbeat("g", "b", 0, None, ("t",))
    assert b.epoch == 2 and b.assignment == {"t": (1,)}
    # "a" learns the new epoch at its next heartbeat, with its epoch 1 not fenced.
    a, send = groups.heartbeat("g", "a", 1, None, None)
    assert send and (a.epoch, a.assignment) == (2, {"t": (0,)})
    with pytest.raises(ShareGroupError) as e:
        groups.heartbeat("g", "a", 1, None, None)
    assert e.value.code == E.fenced_member_epoch
    with pytest.raises(ShareGroupError) as e:
        groups.heartbeat("g", "zz", 5, None, None)
    assert e.value.code == E.unknown_member_id
    clock.advance(44_999)
    groups.heartbeat("g", "a", 2, None, None)
    clock.advance(1)  # "b" missed its session
    assert gone == ["b"] and list(groups.groups["g"].members) == ["a"]
    groups.heartbeat("g", "c", 0, None, ("t",))
    groups.heartbeat("g", "d", 0, None, ("t",))
    with pytest.raises(ShareGroupError) as e:
        groups.heartbeat("g", "e", 0, None, ("t",))
    assert e.value.code == E.group_max_size_reached
    assert groups.heartbeat("g", "a", groups.groups["g"].members["a"].epoch, None, None)[0]
    assert groups.heartbeat("g", "a", -1, None, None) == (None, False)
    assert gone == ["b", "a"]


def test_aborted_batches_archived_not_acquired():
    sp = part(FakeClock())
    got = sp.acquire("a", [(0, 4, False), (5, 9, True), (10, 14, False)], 100)
    assert got == [(0, 4, 1), (10, 14, 1)]
    assert sp.state_of(7) == (ARCHIVED, 0)
    sp.acknowledge("a", [(0, 4, (ACCEPT,))])
    assert sp.start == 10, "the archived aborted records do not hold the start back"


def test_log_start_passing_the_start_offset_moves_it():
    sp = part(FakeClock())
    sp.acquire("a", [(0, 9)], 100)
    sp.move_start(6)
    assert (sp.start, sp.end) == (6, 10)
    assert sp.state_of(5) is None and sp.state_of(6) == (ACQUIRED, 1)
    sp.move_start(20)
    assert (sp.start, sp.end, sp.spans) == (20, 20, [])
