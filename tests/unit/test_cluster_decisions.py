"""The controller's pure decisions against Kafka's: the leader-election algorithms
(PartitionLeaderElectionAlgorithms) and AdminUtils.assignReplicasToBrokers, whose documented
examples (its Javadoc and AdminRackAwareTest / AdminZkClientTest) are the expected values."""
import random
from collections import Counter

import pytest

from kafkalite.cluster.decisions import (
    Election, assign_replicas, elect_controlled_shutdown_leader, elect_leader,
    elect_preferred_leader, elect_reassignment_leader, rack_alternated)
from kafkalite.wire.errors import ErrorCode, KafkaError


# --- leader election ---------------------------------------------------------------------

def test_offline_election_takes_first_live_isr_replica_in_assignment_order():
    # 3 is first in the ISR list, but assignment order decides.
    assert elect_leader([1, 2, 3], isr=[3, 2], live={2, 3}, unclean=False) == \
        Election(2, (3, 2))


def test_offline_election_drops_dead_replicas_from_the_isr():
    assert elect_leader([1, 2, 3], isr=[1, 2, 3], live={2, 3}, unclean=False) == \
        Election(2, (2, 3))


def test_offline_election_without_live_isr_member_stays_offline_when_clean():
    assert elect_leader([1, 2, 3], isr=[1], live={2, 3}, unclean=False) is None


def test_unclean_election_takes_first_live_replica_alone_in_the_isr():
    assert elect_leader([1, 2, 3], isr=[1], live={3, 2}, unclean=True) == Election(2, (2,))
    assert elect_leader([1, 2, 3], isr=[1], live=set(), unclean=True) is None


def test_unclean_election_still_prefers_an_isr_member():
    assert elect_leader([1, 2, 3], isr=[3], live={2, 3}, unclean=True) == Election(3, (3,))


def test_preferred_election_only_ever_picks_the_first_assigned_replica():
    assert elect_preferred_leader([2, 1, 3], isr=[1, 2, 3], live={1, 2, 3}) == \
        Election(2, (1, 2, 3))
    assert elect_preferred_leader([2, 1, 3], isr=[1, 3], live={1, 2, 3}) is None
    assert elect_preferred_leader([2, 1, 3], isr=[1, 2, 3], live={1, 3}) is None
    assert elect_preferred_leader([], isr=[1], live={1}) is None


def test_reassignment_election_picks_from_the_target_replicas():
    assert elect_reassignment_leader([4, 5, 1], isr=[1, 2, 5], live={1, 2, 4, 5}) == \
        Election(5, (1, 2, 5))
    assert elect_reassignment_leader([4, 5], isr=[1, 2], live={1, 2, 4, 5}) is None


def test_controlled_shutdown_moves_leadership_off_and_shrinks_the_isr():
    assert elect_controlled_shutdown_leader([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3},
                                            shutting_down={1}) == Election(2, (2, 3))
    assert elect_controlled_shutdown_leader([1, 2, 3], isr=[1, 3], live={1, 3},
                                            shutting_down={1, 3}) is None


# --- replica assignment ------------------------------------------------------------------

def test_rack_unaware_matches_kafkas_javadoc_table():
    # AdminUtils' Javadoc: 5 brokers, 10 partitions, RF 3, first replicas p0..p4 on
    # brokers 0..4, then p5..p9; 2nd replica row "p4 p0 p1 p2 p3 / p8 p9 p5 p6 p7";
    # 3rd "p3 p4 p0 p1 p2 / p7 p8 p9 p5 p6" (AdminZkClientTest.testReplicaAssignment).
    got = assign_replicas([0, 1, 2, 3, 4], None, 10, 3, start_index=0, shift=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_alternated_list_matches_kafkas_examples():
    assert rack_alternated({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2",
                            5: "rack1"}) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({0: "rack1", 1: "rack1", 2: "rack1", 3: "rack2", 4: "rack2",
                            5: "rack2", 6: "rack3", 7: "rack3", 8: "rack3"}) == \
        [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_matches_kafkas_javadoc_example():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas(list(racks), racks, 7, 3, start_index=0, shift=0)
    # "6 -> 0,4,2 (instead of repeating 0,3,1 as partition 0)": the followers shift.
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                   5: [2, 0, 3], 6: [0, 4, 2]}


def test_rack_aware_puts_each_replica_on_its_own_rack_when_it_can():
    racks = {b: f"r{b % 3}" for b in range(9)}
    for start in range(9):
        for pid, replicas in assign_replicas(list(racks), racks, 30, 3, start, start).items():
            assert len({racks[b] for b in replicas}) == 3, (start, pid, replicas)


def test_rack_unaware_spreads_leaders_and_replicas_evenly():
    got = assign_replicas([1, 2, 3], None, 30, 3, rng=random.Random(7))
    assert Counter(r[0] for r in got.values()) == {1: 10, 2: 10, 3: 10}
    assert all(len(set(r)) == 3 for r in got.values())


def test_start_partition_continues_the_leaders_round_robin():
    # CreatePartitions: new partitions' first replicas go on from where the topic's
    # round-robin left off; the follower shift starts afresh from `shift` (Kafka keeps no
    # memory of it), bumped at each multiple of the broker count as in one call.
    whole = assign_replicas([0, 1, 2, 3, 4], None, 12, 3, start_index=2, shift=2)
    tail = assign_replicas([0, 1, 2, 3, 4], None, 2, 3, start_index=2, shift=2,
                           start_partition=10)
    assert [tail[p][0] for p in (10, 11)] == [whole[p][0] for p in (10, 11)]
    assert tail == {10: [2, 1, 3], 11: [3, 2, 4]}  # shift 2+1 at partition 10


@pytest.mark.parametrize("partitions, rf, code", [
    (3, 4, ErrorCode.invalid_replication_factor),
    (3, 0, ErrorCode.invalid_replication_factor),
    (0, 1, ErrorCode.invalid_partitions),
])
def test_refusals(partitions, rf, code):
    with pytest.raises(KafkaError) as e:
        assign_replicas([1, 2, 3], None, partitions, rf, 0, 0)
    assert e.value.code == code


def test_partial_rack_information_is_refused():
    with pytest.raises(KafkaError) as e:
        assign_replicas([1, 2, 3], {1: "a", 2: "b"}, 3, 2, 0, 0)
    assert e.value.code == ErrorCode.invalid_replica_assignment
