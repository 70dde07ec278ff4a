"""A partition leader's follower states, high watermark, ISR shrink/expand and acks=all
waiters (cluster/replication_leader.py) over a real replicated PartitionLog, on the
FakeClock, and a follower's truncation decision (replica_fetcher.truncation_offset)."""
from __future__ import annotations

import pytest

from kafkalite.clock import FakeClock
from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.wire.records import parse_header
from kafkalite.cluster.replica_fetcher import truncation_offset
from kafkalite.cluster.replication_leader import PartitionLeader
from kafkalite.wire.errors import ErrorCode
from tests.helpers.kbatch import simple_batch

LAG = 30_000
T0 = 1_700_000_000_000


def grow(log: PartitionLog, to: int) -> None:
    """Leader appends up to log end offset `to` (one batch)."""
    batch = simple_batch(to - log.log_end_offset, ts=T0)
    log.append(batch, parse_header(batch), T0, leader_epoch=5)


@pytest.fixture
def open_log(tmp_path):
    made = []

    def make(leo: int = 0) -> PartitionLog:
        p = PartitionLog(str(tmp_path / f"t-{len(made)}"), "t", len(made), LogConfig())
        p.replicated = True  # the HW is stored, moved only by update_high_watermark
        made.append(p)
        if leo:
            grow(p, leo)
        assert p.high_watermark == 0
        return p
    yield make
    for p in made:
        p.close()


def leader(log: PartitionLog, clock: FakeClock, isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=1):
    return PartitionLeader(log, 1, 5, replicas, isr, clock.monotonic_ms(), LAG,
                           lambda: min_isr)


def test_hw_is_the_smallest_leo_of_the_isr_and_never_goes_back(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock)
    assert not lead.maybe_increment_hw()  # followers' LEOs unknown: the HW stays
    lead.follower_fetched(2, 7, clock.monotonic_ms())
    assert not lead.maybe_increment_hw() and log.high_watermark == 0  # 3 still unknown
    lead.follower_fetched(3, 4, clock.monotonic_ms())
    assert lead.maybe_increment_hw() and log.high_watermark == 4
    lead.follower_fetched(3, 10, clock.monotonic_ms())
    assert lead.maybe_increment_hw() and log.high_watermark == 7
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    assert lead.maybe_increment_hw() and log.high_watermark == 10
    # a follower fetching from further back (it truncated) never moves the HW back
    lead.follower_fetched(2, 3, clock.monotonic_ms())
    assert not lead.maybe_increment_hw() and log.high_watermark == 10
    grow(log, 12)  # the leader's own append: the ISR has not fetched it yet
    assert not lead.maybe_increment_hw() and log.high_watermark == 10


def test_a_follower_out_of_the_isr_does_not_hold_the_hw(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2))
    lead.follower_fetched(3, 0, clock.monotonic_ms())
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    assert lead.maybe_increment_hw() and log.high_watermark == 10


def test_alone_in_the_isr_the_hw_follows_the_log_end(open_log):
    clock, log = FakeClock(), open_log(3)
    lead = leader(log, clock, isr=(1,))
    assert lead.maybe_increment_hw() and log.high_watermark == 3
    grow(log, 8)
    assert lead.maybe_increment_hw() and log.high_watermark == 8


def test_shrink_after_the_lag_time_not_before(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock)
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    lead.follower_fetched(3, 10, clock.monotonic_ms())
    grow(log, 20)  # appended; 3 keeps fetching, 2 stops
    clock.advance(LAG // 2)
    lead.follower_fetched(3, 20, clock.monotonic_ms())
    clock.advance(LAG // 2)
    assert lead.shrunk(clock.monotonic_ms()) is None  # exactly the lag: still in sync
    clock.advance(1)
    assert lead.out_of_sync(clock.monotonic_ms()) == {2}
    assert lead.shrunk(clock.monotonic_ms()) == (1, 3)


def test_a_follower_at_the_log_end_stays_in_sync_however_long_idle(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock)
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    lead.follower_fetched(3, 10, clock.monotonic_ms())
    clock.advance(10 * LAG)
    assert lead.shrunk(clock.monotonic_ms()) is None


def test_a_slow_follower_fetching_what_the_leader_had_at_its_last_fetch_is_caught_up(open_log):
    """Kafka's lastCaughtUpTime rule: caught up as of the previous fetch."""
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2), replicas=(1, 2))
    clock.advance(LAG // 2)
    lead.follower_fetched(2, 5, clock.monotonic_ms())  # behind (leader at 10)
    clock.advance(LAG - 100)
    grow(log, 15)
    lead.follower_fetched(2, 10, clock.monotonic_ms())  # what the leader had at the last fetch
    # caught up as of its previous fetch, LAG - 100 ago (not since the leadership began)
    assert lead.shrunk(clock.monotonic_ms()) is None
    clock.advance(200)
    assert lead.shrunk(clock.monotonic_ms()) == (1,)


def test_expand_when_caught_up_to_the_hw_and_the_epoch_start(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2))
    assert lead.epoch_start_offset == 10
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    lead.maybe_increment_hw()
    grow(log, 12)
    lead.follower_fetched(2, 12, clock.monotonic_ms())
    lead.maybe_increment_hw()
    assert log.high_watermark == 12
    lead.follower_fetched(3, 9, clock.monotonic_ms())
    assert lead.expansion(3) is None  # below the HW and the epoch's start
    lead.follower_fetched(3, 12, clock.monotonic_ms())
    assert lead.expansion(3) == (1, 2, 3)
    assert lead.expansion(2) is None  # already in
    lead.pending = (1, 2, 3)
    assert lead.expansion(3) is None  # one ISR write at a time
    lead.set_isr((1, 2, 3))
    assert lead.pending is None and lead.isr == (1, 2, 3)


def test_a_pending_expansion_counts_for_the_hw(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1,))
    lead.maybe_increment_hw()
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    lead.pending = (1, 2)
    grow(log, 14)
    assert not lead.maybe_increment_hw() and log.high_watermark == 10  # 2 has not got 14
    lead.follower_fetched(2, 14, clock.monotonic_ms())
    assert lead.maybe_increment_hw() and log.high_watermark == 14


async def test_acks_all_waiters_released_by_the_hw(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2), replicas=(1, 2), min_isr=2)
    assert lead.enough_replicas()
    grow(log, 13)
    first = lead.wait_for(11)
    second = lead.wait_for(13)
    lead.follower_fetched(2, 11, clock.monotonic_ms())
    lead.maybe_increment_hw()
    assert first.done() and first.result() == ErrorCode.none and not second.done()
    lead.follower_fetched(2, 13, clock.monotonic_ms())
    lead.maybe_increment_hw()
    assert second.result() == ErrorCode.none
    done = lead.wait_for(12)  # below the HW already
    assert done.result() == ErrorCode.none


async def test_below_min_insync_acks_all_is_refused_and_the_hw_stays(open_log):
    """Kafka 3.8 (KIP-966): no HW move while the ISR is below min.insync.replicas, so a
    waiting acks=all write is not acknowledged by a lone leader (it times out)."""
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2, 3), min_isr=2)
    for r in (2, 3):
        lead.follower_fetched(r, 10, clock.monotonic_ms())
    lead.maybe_increment_hw()
    grow(log, 11)
    fut = lead.wait_for(11)
    lead.set_isr((1, 2))
    assert lead.enough_replicas()
    lead.set_isr((1,))  # both followers dropped out while the write waited
    assert not lead.enough_replicas()  # the next acks=all: NOT_ENOUGH_REPLICAS
    lead.follower_fetched(2, 11, clock.monotonic_ms())
    assert not lead.maybe_increment_hw() and log.high_watermark == 10
    assert not fut.done()
    lead.set_isr((1, 2))  # 2 rejoined
    assert lead.maybe_increment_hw() and log.high_watermark == 11
    assert fut.result() == ErrorCode.none


async def test_a_write_the_hw_passed_answers_after_append_below_min_insync(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2), replicas=(1, 2), min_isr=2)
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    lead.maybe_increment_hw()
    lead.set_isr((1,))
    # e.g. a duplicate of a batch already below the HW (checkEnoughReplicasReachOffset)
    assert lead.wait_for(10).result() == ErrorCode.not_enough_replicas_after_append


def test_a_caught_up_follower_about_to_rejoin_holds_the_hw(open_log):
    """Kafka's shouldWaitForReplicaToJoinIsr: out of the ISR but caught up within the lag
    and eligible, it counts; ineligible (not a live broker) or long behind, it does not."""
    clock, log = FakeClock(), open_log(10)
    live = {2, 3}
    lead = PartitionLeader(log, 1, 5, (1, 2, 3), (1, 2), clock.monotonic_ms(), LAG,
                           eligible=live.__contains__)
    lead.follower_fetched(2, 10, clock.monotonic_ms())
    lead.follower_fetched(3, 10, clock.monotonic_ms())  # caught up: at the leader's end
    grow(log, 15)
    lead.follower_fetched(2, 15, clock.monotonic_ms())
    lead.follower_fetched(3, 12, clock.monotonic_ms())
    assert lead.maybe_increment_hw(clock.monotonic_ms()) and log.high_watermark == 12
    live.discard(3)
    assert lead.maybe_increment_hw(clock.monotonic_ms()) and log.high_watermark == 15
    grow(log, 20)
    live.add(3)
    lead.follower_fetched(2, 20, clock.monotonic_ms())
    clock.advance(LAG + 1)  # 3 last caught up more than the lag ago
    assert lead.maybe_increment_hw(clock.monotonic_ms()) and log.high_watermark == 20


async def test_waiters_fail_when_the_leadership_ends(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock)
    grow(log, 11)
    fut = lead.wait_for(11)
    lead.fail_waiters(ErrorCode.not_leader_or_follower)
    assert fut.result() == ErrorCode.not_leader_or_follower


async def test_a_new_epoch_of_the_same_leader_keeps_followers_and_waiters(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2, 3))
    for r in (2, 3):
        lead.follower_fetched(r, 10, clock.monotonic_ms())
    lead.maybe_increment_hw()
    grow(log, 12)
    fut = lead.wait_for(12)
    lead.new_epoch(6)  # the controller dropped 3 from the ISR, bumping the epoch
    lead.set_isr((1, 2))
    assert (lead.epoch, lead.epoch_start_offset) == (6, 12)
    lead.follower_fetched(2, 12, clock.monotonic_ms())
    assert lead.maybe_increment_hw() and fut.result() == ErrorCode.none
    lead.follower_fetched(3, 11, clock.monotonic_ms())
    assert lead.expansion(3) is None  # below this epoch's start
    lead.follower_fetched(3, 12, clock.monotonic_ms())
    assert lead.expansion(3) == (1, 2, 3)


def test_replicas_change_keeps_known_followers(open_log):
    clock, log = FakeClock(), open_log(10)
    lead = leader(log, clock, isr=(1, 2), replicas=(1, 2))
    lead.follower_fetched(2, 9, clock.monotonic_ms())
    lead.set_replicas((1, 2, 4), clock.monotonic_ms())
    assert lead.followers[2].leo == 9 and lead.followers[4].leo == -1
    assert not lead.follower_fetched(7, 3, clock.monotonic_ms())  # not a replica


@pytest.mark.parametrize("leo,hw,requested,leader_epoch,leader_end,own_ends,expected", [
    (100, 90, 3, 3, 120, {}, 100),     # the leader has more of our epoch: nothing to cut
    (100, 90, 3, 3, 80, {}, 80),       # a tail of our epoch the leader never had
    (100, 90, 4, 3, 80, {3: 85}, 80),  # the leader never had epoch 4: its end of 3
    (100, 90, 4, 3, 95, {3: 85}, 85),  # ... or ours of 3, whichever is smaller
    (100, 90, 3, -1, -1, {}, 90),      # the leader knows no such epoch: the HW (pre-KIP-101)
])
def test_truncation_offset(leo, hw, requested, leader_epoch, leader_end, own_ends, expected):
    assert truncation_offset(leo, hw, requested, leader_epoch, leader_end,
                             own_ends.get) == expected
