# The controller's pure state transitions (kafkalite.cluster.controller), as Kafka 3.8's
# ZooKeeper-mode PartitionStateMachine / ReplicaStateMachine make them: a new partition's
# first state, the offline election, and a replica going offline (the ISR shrink that keeps
# the last member).
from __future__ import annotations

from kafkalite.cluster.controller import initial_state, offline_election, remove_replica
from kafkalite.cluster.zkdata import LEADER_NONE, RECOVERED, RECOVERING, PartitionState


def test_new_partition_is_led_by_its_first_live_replica_with_every_live_one_in_sync():
    assert initial_state((2, 3, 1), {1, 2, 3}, 7) == PartitionState(2, 0, (2, 3, 1), 7)
    assert initial_state((2, 3, 1), {1, 3}, 7) == PartitionState(3, 0, (3, 1), 7)
    assert initial_state((2, 3), {1}, 7) is None


def test_offline_election_takes_the_next_live_isr_member_in_assignment_order():
    state = PartitionState(1, 4, (3, 1, 2), 5)
    elected = offline_election(state, (1, 2, 3), {2, 3}, 6, unclean=False)
    # assignment order, not ISR order, decides; the dead leader leaves the ISR
    assert elected == PartitionState(2, 5, (3, 2), 6)


def test_offline_election_leaves_a_partition_with_a_live_leader_alone():
    assert offline_election(PartitionState(2, 4, (1, 2), 5), (1, 2), {2}, 6, False) is None


def test_no_live_isr_member_means_no_election_unless_unclean():
    state = PartitionState(1, 4, (1,), 5)
    assert offline_election(state, (1, 2, 3), {2, 3}, 6, unclean=False) is None
    unclean = offline_election(state, (1, 2, 3), {2, 3}, 6, unclean=True)
    assert unclean == PartitionState(2, 5, (2,), 6, RECOVERING)
    # a clean election keeps the recovery state
    assert offline_election(PartitionState(LEADER_NONE, 5, (3,), 5), (1, 2, 3), {3}, 6,
                            False) == PartitionState(3, 6, (3,), 6, RECOVERED)


def test_an_offline_follower_leaves_the_isr_with_a_new_leader_epoch():
    state = PartitionState(1, 4, (1, 2, 3), 5)
    assert remove_replica(state, 2, 6) == PartitionState(1, 5, (1, 3), 6)
    assert remove_replica(PartitionState(1, 4, (1, 3), 5), 2, 6) is None


def test_an_offline_leader_goes_to_minus_one_and_the_last_isr_member_stays():
    # the election found nobody: the dead leader is removed as a replica
    assert remove_replica(PartitionState(1, 4, (1, 2), 5), 1, 6) == \
        PartitionState(LEADER_NONE, 5, (2,), 6)
    assert remove_replica(PartitionState(LEADER_NONE, 5, (2,), 6), 2, 6) == \
        PartitionState(LEADER_NONE, 6, (2,), 6)
    assert remove_replica(PartitionState(3, 4, (3,), 5), 3, 6) == \
        PartitionState(LEADER_NONE, 5, (3,), 6)
