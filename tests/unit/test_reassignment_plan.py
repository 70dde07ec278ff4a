# The reassignment decisions (reassignment_plan.py) as Kafka 3.8's ZooKeeper-mode controller
# makes them: the replica set while moving, what a new target or a cancel does to one in
# progress, validation, completion, and the state writes of its two phases.
from __future__ import annotations

from kafkalite.cluster import zkdata
from kafkalite.cluster.reassignment_plan import (Assignment, dead_adding, invalid_target,
                                                 is_complete, leader_transition, of_topic,
                                                 start_transition, with_partitions)

State = zkdata.PartitionState


def test_moving_lists_the_target_first_then_the_replicas_leaving():
    a = Assignment((1, 2)).reassign_to([2, 3])
    assert a == Assignment((2, 3, 1), adding=(3,), removing=(1,))
    assert a.original == (2, 1) and a.target == (2, 3) and a.in_progress
    assert Assignment((1, 2, 3)).reassign_to([3, 4, 5]) == \
        Assignment((3, 4, 5, 1, 2), (4, 5), (1, 2))


def test_a_new_target_starts_from_the_original_replicas_and_a_cancel_returns_to_them():
    moving = Assignment((1, 2)).reassign_to([2, 3])
    again = moving.reassign_to([3, 4])
    assert again == Assignment((3, 4, 2, 1), adding=(3, 4), removing=(2, 1))
    back = again.reassign_to(again.original)
    assert back.replicas == (2, 1) and not back.in_progress
    assert not Assignment((1, 2)).reassign_to([1, 2]).in_progress


def test_the_topic_znode_carries_adding_and_removing_only_while_moving():
    topic = zkdata.TopicAssignment({0: (1, 2), 1: (2, 3)}, "id")
    moving = with_partitions(topic, {0: Assignment((1, 2)).reassign_to([2, 3])})
    assert moving.partitions == {0: (2, 3, 1), 1: (2, 3)}
    assert moving.adding == {0: (3,)} and moving.removing == {0: (1,)}
    decoded = zkdata.TopicAssignment.decode(moving.encode())
    assert of_topic(decoded, 0) == Assignment((2, 3, 1), (3,), (1,))
    done = with_partitions(decoded, {0: Assignment((2, 3))})
    assert done.adding == {} and done.removing == {}
    assert b"adding_replicas\":{}" in done.encode()  # Kafka writes the empty maps


def test_targets_are_validated_as_kafka_validates_them():
    assert invalid_target([]) == "Empty replica list specified in partition reassignment."
    assert invalid_target([1, 1]) == ("Duplicate replica ids in partition reassignment "
                                      "replica list: ArrayBuffer(1, 1)")
    assert invalid_target([1, -2]).startswith("Invalid broker id")
    assert invalid_target([3, 1]) is None
    assert dead_adding(Assignment((1,)).reassign_to([1, 9]), {1, 2}) is not None
    assert dead_adding(Assignment((1, 9)).reassign_to([9]), {1, 2}) is None  # not new


def test_complete_once_every_target_replica_is_in_sync():
    assert not is_complete((2, 3), (1, 2))
    assert is_complete((2, 3), (3, 1, 2))


def test_phase_writes_bump_the_epoch_and_move_a_leader_outside_the_target():
    s = State(1, 4, (1, 2, 3), 7)
    assert start_transition(s, 8) == State(1, 5, (1, 2, 3), 8)
    moved = leader_transition(s, (2, 3), {1, 2, 3}, 8)
    assert (moved.leader, moved.leader_epoch, moved.isr) == (2, 5, (1, 2, 3))
    assert leader_transition(State(2, 4, (1, 2, 3), 7), (2, 3), {1, 2, 3}, 8).leader == 2
    dead = leader_transition(State(2, 4, (1, 2, 3), 7), (2, 3), {1, 3}, 8)
    assert dead.leader == 3 and dead.leader_epoch == 5
    assert leader_transition(State(1, 4, (1,), 7), (2, 3), {1, 2, 3}, 8) is None


def test_the_legacy_reassign_partitions_znode_round_trips_in_kafkas_shape():
    data = zkdata.encode_reassign_partitions({("t", 0): [2, 3], ("u", 4): [1]})
    assert data == (b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]},'
                    b'{"topic":"u","partition":4,"replicas":[1]}]}')
    assert zkdata.decode_reassign_partitions(data) == {("t", 0): (2, 3), ("u", 4): (1,)}
