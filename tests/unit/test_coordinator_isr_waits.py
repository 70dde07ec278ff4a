# The group coordinator's SyncGroup in a cluster, on a fake clock, driven directly: the
# leader's assignment is answered only once the ISR of the group's __consumer_offsets
# partition has it (Kafka's storeGroup callback); a write the ISR does not take in time fails
# every member with REBALANCE_IN_PROGRESS (below min.insync.replicas: COORDINATOR_NOT_AVAILABLE)
# and starts a rebalance; an answer that comes after another member joined leaves the new
# rebalance alone. The partition's leader side is the
# real PartitionLeader (cluster/replication_leader.py) over the real offsets log; a follower's
# fetch is what moves its high watermark, as a replica fetcher's would.
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalite.cluster.replication_leader import PartitionLeader
from kafkalite.coordinator.groups import GroupState as S
from tests.unit.test_groups_timers import Harness

LEADER, FOLLOWER = 1, 2


class OffsetsPartitionLed:
    """Replication's produce_error / wait_acks for the one __consumer_offsets partition, led
    here with one follower and min.insync.replicas 2."""

    def __init__(self, h: Harness):
        self.clock = h.clock
        self.log = h.coord.store.ensure_topic().partitions[0]
        self.log.replicated = True  # the high watermark waits for the follower
        self.leader = PartitionLeader(self.log, LEADER, 0, (LEADER, FOLLOWER),
                                      (LEADER, FOLLOWER), h.clock.monotonic_ms(), 30000,
                                      min_isr=lambda: 2)

    def produce_error(self, topic: str, partition: int) -> int:
        return E.none if self.leader.enough_replicas() else E.not_enough_replicas

    def wait_acks(self, topic: str, partition: int, required: int) -> asyncio.Future:
        return self.leader.wait_for(required)

    def follower_caught_up(self) -> None:
        now = self.clock.monotonic_ms()
        self.leader.follower_fetched(FOLLOWER, self.log.log_end_offset, now)
        self.leader.maybe_increment_hw(now)


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def in_cluster(h: Harness) -> OffsetsPartitionLed:
    isr = OffsetsPartitionLed(h)
    h.coord.store.replication = lambda: isr
    return isr


async def settle() -> None:
    for _ in range(5):  # the write's wait and its callback run on the loop
        await asyncio.sleep(0)


async def joined(h: Harness, n: int) -> list:
    futs = [h.join("g") for _ in range(n)]
    h.advance(0)
    return [f.result() for f in futs]


async def test_the_assignment_is_answered_once_the_isr_has_it(h):
    isr = in_cluster(h)
    results = await joined(h, 2)
    leader = next(r for r in results if r.members)
    other = next(r for r in results if r is not leader)
    mine = h.sync("g", leader, {leader.member_id: b"L", other.member_id: b"O"})
    theirs = h.sync("g", other)
    await settle()
    assert not mine.done() and not theirs.done()
    assert h.coord.groups["g"].state == S.COMPLETING_REBALANCE
    isr.follower_caught_up()
    await settle()
    assert (mine.result().error, mine.result().assignment) == (E.none, b"L")
    assert (theirs.result().error, theirs.result().assignment) == (E.none, b"O")
    assert h.coord.groups["g"].state == S.STABLE


async def test_a_write_the_isr_does_not_take_fails_every_member_and_rebalances(h):
    isr = in_cluster(h)
    h.coord.store.write_timeout_ms = 50  # offsets.commit.timeout.ms
    results = await joined(h, 2)
    leader = next(r for r in results if r.members)
    other = next(r for r in results if r is not leader)
    theirs = h.sync("g", other)
    mine = h.sync("g", leader, {leader.member_id: b"L", other.member_id: b"O"})
    # the follower never fetches: REQUEST_TIMED_OUT, which storeGroup answers
    # REBALANCE_IN_PROGRESS
    await asyncio.wait([mine, theirs], timeout=10)
    assert mine.result().error == theirs.result().error == E.rebalance_in_progress
    assert h.coord.groups["g"].state == S.PREPARING_REBALANCE
    # below min.insync.replicas nothing is written: COORDINATOR_NOT_AVAILABLE
    isr.leader.set_isr((LEADER,))
    again = [h.join("g", r.member_id) for r in results]
    rejoined = [f.result() for f in again]
    leader = next(r for r in rejoined if r.members)
    other = next(r for r in rejoined if r is not leader)
    theirs = h.sync("g", other)
    mine = h.sync("g", leader, {leader.member_id: b"L", other.member_id: b"O"})
    await settle()
    assert mine.result().error == theirs.result().error == E.coordinator_not_available


async def test_an_answer_after_a_new_join_leaves_the_new_rebalance_alone(h):
    isr = in_cluster(h)
    (leader,) = await joined(h, 1)
    mine = h.sync("g", leader, {leader.member_id: b"L"})
    await settle()
    newcomer = h.join("g")  # a new member: the group prepares another rebalance
    assert mine.result().error == E.rebalance_in_progress
    assert h.coord.groups["g"].state == S.PREPARING_REBALANCE
    isr.follower_caught_up()  # the old assignment reaches the ISR now
    await settle()
    group = h.coord.groups["g"]
    assert group.state == S.PREPARING_REBALANCE and group.generation == leader.generation
    assert not newcomer.done()
