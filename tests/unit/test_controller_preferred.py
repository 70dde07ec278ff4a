# The controller's pure decisions for preferred-leader elections and controlled shutdown
# (kafkalite.cluster.decisions), as Kafka 3.8's ZooKeeper-mode controller makes them:
# checkAndTriggerAutoLeaderRebalance's per-broker imbalance, the preferred strategy and the
# controlled-shutdown strategy.
from __future__ import annotations

from kafkalite.cluster import zkdata
from kafkalite.cluster.decisions import (preferred_imbalance, preferred_transition,
                                         rebalance_candidates, shutdown_transition)

A = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("t", 2): (3, 1, 2), ("u", 0): (1, 3, 2)}


def test_imbalance_is_the_share_of_a_brokers_preferred_partitions_led_elsewhere():
    leaders = {("t", 0): 2, ("t", 1): 2, ("t", 2): 3, ("u", 0): 1}
    assert preferred_imbalance(A, leaders) == {1: 0.5, 2: 0.0, 3: 0.0}
    # an unknown leader (no state yet) does not count as led elsewhere
    assert preferred_imbalance(A, {("t", 0): 2})[1] == 0.5
    assert preferred_imbalance(A, {})[1] == 0.0


def test_rebalance_moves_only_brokers_above_the_percentage_where_they_can_lead():
    states = {("t", 0): (2, (2, 3, 1)), ("t", 1): (2, (2, 3, 1)), ("t", 2): (3, (3, 1, 2)),
              ("u", 0): (1, (1, 3, 2))}
    live = {1, 2, 3}
    assert rebalance_candidates(A, states, live, 10) == [("t", 0)]
    # 50% led elsewhere is not more than 50%
    assert rebalance_candidates(A, states, live, 50) == []
    # the preferred replica must be live and in sync
    assert rebalance_candidates(A, states, {2, 3}, 10) == []
    out_of_sync = {**states, ("t", 0): (2, (2, 3))}
    assert rebalance_candidates(A, out_of_sync, live, 10) == []
    # every broker over the threshold gets back all it can lead
    both = {**states, ("t", 2): (1, (1, 2, 3)), ("u", 0): (3, (3, 1))}
    assert rebalance_candidates(A, both, live, 10) == [("t", 0), ("t", 2), ("u", 0)]


def test_preferred_transition_keeps_the_isr_and_bumps_the_leader_epoch():
    s = zkdata.PartitionState(2, 4, (2, 3, 1), 1)
    assert preferred_transition(s, (1, 2, 3), {1, 2, 3}, 7) == \
        zkdata.PartitionState(1, 5, (2, 3, 1), 7)
    assert preferred_transition(s, (2, 1, 3), {1, 2, 3}, 7) is None  # leads already
    assert preferred_transition(s, (1, 2, 3), {2, 3}, 7) is None  # not live
    assert preferred_transition(zkdata.PartitionState(2, 4, (2, 3), 1), (1, 2, 3),
                                {1, 2, 3}, 7) is None  # not in sync


def test_shutdown_transition_moves_the_leader_and_drops_the_brokers_shutting_down():
    s = zkdata.PartitionState(1, 3, (1, 2, 3), 1)
    assert shutdown_transition(s, (1, 2, 3), {1, 2, 3}, {1}, 5) == \
        zkdata.PartitionState(2, 4, (2, 3), 5)
    # another broker shutting down is skipped and leaves the ISR too
    assert shutdown_transition(s, (1, 2, 3), {1, 2, 3}, {1, 2}, 5) == \
        zkdata.PartitionState(3, 4, (3,), 5)
    assert shutdown_transition(s, (1, 2, 3), {1, 2, 3}, {2}, 5) is None  # 1 still leads
    alone = zkdata.PartitionState(1, 3, (1,), 1)
    assert shutdown_transition(alone, (1, 2, 3), {1, 2, 3}, {1}, 5) is None  # stays
