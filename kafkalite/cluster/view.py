# What the broker's handlers ask about the cluster: which brokers exist (their endpoint on
# each listener, their rack), who the controller is, the cluster id, and each partition's
# leader, leader epoch, replicas, ISR and offline replicas.
#
# Handlers never invent node ids or leaders: they ask `broker.view`. SingleNodeView is
# kafkalite without ZooKeeper, one node that leads every partition at leader epoch 0 and
# is its own controller; the ZooKeeper-backed view answers the same questions from znodes.
# An endpoint is always the one of the listener the request came through (Kafka answers
# each client with the brokers' endpoints for the request's listener name).
from __future__ import annotations

from dataclasses import dataclass
import uuid
from typing import Any, Protocol, Sequence

from ..security.listeners import Listener
from ..wire.errors import ErrorCode

NO_NODE = -1
NO_EPOCH = -1  # a request's current_leader_epoch when the client names none


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int  # NO_NODE when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


class ClusterView(Protocol):
    node_id: int  # this broker's
    # Whether Metadata may auto-create a topic in this broker's logs (single node); in a
    # cluster topics are created in ZooKeeper.
    auto_create_locally: bool

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    def brokers(self, listener: Listener | None) -> Sequence[BrokerNode]:
        """Every live broker, with its endpoint on `listener` (None: the default one)."""

    def broker(self, node_id: int, listener: Listener | None) -> BrokerNode | None:
        """One live broker at its endpoint on `listener`, None when it is not live."""

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        """The partition's state, None when the cluster does not know it."""

    def partitions(self, topic: str) -> Sequence[PartitionState]:
        """Every partition's state, by partition index (empty for an unknown topic)."""

    def is_leader(self, topic: str, partition: int) -> bool:
        """Whether this broker leads the partition now."""

    def topic_names(self) -> Sequence[str]:
        """Every topic the cluster knows."""

    def topic(self, name: str) -> Any:
        """The topic (`name`, `topic_id`, `internal`), None when the cluster does not know it."""

    def topic_by_id(self, topic_id: uuid.UUID) -> Any:
        """The topic with that id, None when unknown."""

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int) -> int:
        """ErrorCode.none when a request for the partition's leader (at the client's
        current_leader_epoch, -1 for none) may be served here, else the error to answer."""

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch (-1 when unknown)."""


class SingleNodeView:
    """kafkalite alone: this node is every partition's leader, replica and ISR, at leader
    epoch 0, and the controller (a combined KRaft node, as Kafka's single-node setups)."""

    LEADER_EPOCH = 0
    auto_create_locally = True

    def __init__(self, broker: Any):
        # The broker, not its fields: its advertised address is known only once the
        # server has bound its listeners, and its cluster id once the logs are open.
        self._broker = broker
        self.node_id: int = broker.node_id
        me = (self.node_id,)
        self._state = PartitionState(self.node_id, self.LEADER_EPOCH, me, me)

    @property
    def cluster_id(self) -> str:
        return self._broker.logs.cluster_id

    @property
    def controller_id(self) -> int:
        return self.node_id

    def brokers(self, listener: Listener | None) -> Sequence[BrokerNode]:
        return (self._me(listener),)

    def broker(self, node_id: int, listener: Listener | None) -> BrokerNode | None:
        return self._me(listener) if node_id == self.node_id else None

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        t = self._broker.logs.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return self._state

    def partitions(self, topic: str) -> Sequence[PartitionState]:
        t = self._broker.logs.get(topic)
        return (self._state,) * len(t.partitions) if t is not None else ()

    def is_leader(self, topic: str, partition: int) -> bool:
        return self.partition(topic, partition) is not None

    def topic_names(self) -> Sequence[str]:
        return list(self._broker.logs.topics)

    def topic(self, name: str) -> Any:
        return self._broker.logs.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> Any:
        return self._broker.logs.by_id.get(topic_id)

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int) -> int:
        if self.partition(topic, partition) is None:
            return ErrorCode.unknown_topic_or_partition
        if current_leader_epoch > self.LEADER_EPOCH:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.none

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.LEADER_EPOCH

    def _me(self, listener: Listener | None) -> BrokerNode:
        if listener is None:
            return BrokerNode(self.node_id, self._broker.host, self._broker.port)
        return BrokerNode(self.node_id, listener.advertised_host,
                          listener.advertised_port or listener.port)
