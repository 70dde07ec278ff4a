# The coordinators following the leadership of their internal topics' partitions (issue 17,
# design step 8): the group coordinator lives with the leader of each __consumer_offsets
# partition, the transaction coordinator with that of each __transaction_state partition,
# moving with it as Kafka's onElection/onResignation. The cluster view tells every state
# change (add_listener, in ZooKeeper's order, on the loop); this broker becoming the leader
# loads the partition (elect with the leader epoch, the coordinator epoch), ceasing to be it
# unloads the partition (resign). Nothing here runs on one node.
from __future__ import annotations

import logging
from typing import Any

from ..coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ..coordinator.transactions_log import TOPIC as TXN_TOPIC

log = logging.getLogger("kafkalite.cluster")


class CoordinatorLeadership:
    def __init__(self, broker: Any, view: Any):
        self.broker = broker
        self.view = view
        self.node_id: int = view.node_id

    def coordinator(self, topic: str) -> Any:
        """The coordinator of `topic`'s partitions (one with a PartitionLeadership), None
        for any other topic."""
        coord = (self.broker.groups if topic == OFFSETS_TOPIC else
                 self.broker.transactions if topic == TXN_TOPIC else None)
        return coord if getattr(coord, "leadership", None) is not None else None

    def start(self) -> None:
        """Follow the view from now on, and take the partitions it shows led here already
        (the view read ZooKeeper once before this)."""
        self.view.add_listener(self.on_state)
        for topic in (OFFSETS_TOPIC, TXN_TOPIC):
            coord = self.coordinator(topic)
            t = self.view.topic(topic)
            if coord is None or t is None:
                continue
            for p in sorted(t.assignment.partitions):
                state = self.view.partition(topic, p)
                if state is not None and state.leader == self.node_id:
                    coord.leadership.elect(p, state.leader_epoch)

    def on_state(self, topic: str, partition: int, old: Any, new: Any) -> None:
        coord = self.coordinator(topic)
        if coord is None:
            return
        leads = new is not None and new.leader == self.node_id
        led = old is not None and old.leader == self.node_id
        if leads:
            if not led:
                log.info("Leader of %s-%d at epoch %d: loading its coordinator state", topic,
                         partition, new.leader_epoch)
            coord.leadership.elect(partition, new.leader_epoch)
        elif led or partition in coord.leadership.owned or partition in coord.loading_partitions:
            coord.leadership.resign(partition)


def follow_leadership(broker: Any, view: Any) -> CoordinatorLeadership:
    leadership = CoordinatorLeadership(broker, view)
    leadership.start()
    return leadership
