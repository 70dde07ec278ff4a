# The cluster as ZooKeeper says it is (issue 17, design steps 3 and 5): the ClusterView of a
# broker with zookeeper.connect. Kafka's ZooKeeper-mode brokers learned it from the
# controller's UpdateMetadata/LeaderAndIsr; kafkalite brokers read the controller's znodes
# themselves (design §4), so ZooKeeper stays the one source of truth:
#
#   brokers      the membership's live set (/brokers/ids, kept by membership.py), each at its
#                registered endpoint for the request's listener
#   controller   /controller (watched; -1 while there is none)
#   topics       /brokers/topics children, each topic's assignment znode (replicas, topic id)
#                and its partitions' state znodes (leader, leader epoch, ISR), all watched;
#                offline replicas are the replicas that are not live
#
# The view has a ZooKeeper session of its own (the membership's consumes its own events), and
# one task applies that session's watch events in order on the event loop; kazoo's thread
# only queues them. ZooKeeper watches fire once: every read re-arms its watch, and a new
# session (after a loss) re-reads everything. A topic with a replica on this broker gets its
# local log before the view shows the topic, so a leader can always append; a reassignment
# that changes a partition's replicas is told to the listeners (same state, new replicas),
# and one that leaves this broker no replica of a topic deletes its local log.
from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..security.listeners import Listener
from ..wire.errors import ErrorCode
from . import zkdata
from .local_topics import drop_local_topic, empty_local_partition
from .membership import ClusterError, RetryTimer
from .view import NO_EPOCH, NO_NODE, BrokerNode, PartitionState
from .zk import BadVersion, NoNode, SessionEvent, WatchEvent, ZkClient, ZkError

log = logging.getLogger("kafkalite.cluster")

INTERNAL_TOPICS = frozenset(("__consumer_offsets", "__transaction_state",
                             "__share_group_state"))
_RESYNC = SessionEvent("RESYNC")  # what a retry timer queues
ZERO_UUID = uuid.UUID(int=0)

# Called as listener(topic, partition, old, new) on the event loop whenever a partition's
# state znode changes (old/new None: not known before / gone with its topic). Replication and
# the coordinators follow leadership through it, in ZooKeeper's order.
StateListener = Callable[[str, int, "zkdata.PartitionState | None",
                          "zkdata.PartitionState | None"], None]


@dataclass(frozen=True)
class ClusterTopic:
    """A topic as the cluster knows it (the attributes handlers read from a local Topic)."""
    name: str
    topic_id: uuid.UUID
    internal: bool
    assignment: zkdata.TopicAssignment


def topic_uuid(text: str | None) -> uuid.UUID:
    """Kafka's base64 Uuid string as a UUID (the zero one for a topic without an id)."""
    if not text:
        return ZERO_UUID
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


class ZkClusterView:
    """ClusterView from ZooKeeper's znodes, kept current by watches."""

    auto_create_locally = False  # topics are created in ZooKeeper (the controller's job)

    def __init__(self, broker: Any, membership: Any, client: ZkClient):
        self._broker = broker
        self.node_id: int = broker.node_id
        self._members = membership.members  # the live set, updated in place
        self._cluster_id: str = membership.cluster_id
        self.client = client
        self._controller = NO_NODE
        self.controller_changes = 0  # elections seen (cluster_metrics' ControllerStats)
        self._topics: dict[str, ClusterTopic] = {}
        self._by_id: dict[uuid.UUID, ClusterTopic] = {}
        self._states: dict[tuple[str, int], zkdata.PartitionState] = {}
        # Each state znode's version as last read or written: the partition epoch a
        # leader's conditional ISR write is based on (write_isr).
        self._versions: dict[tuple[str, int], int] = {}
        self._task: asyncio.Task | None = None
        self._retry = RetryTimer(broker.clock)
        self._listeners: list[StateListener] = []

    def add_listener(self, listener: StateListener) -> None:
        """Follow every partition state change from now on (see StateListener)."""
        self._listeners.append(listener)

    def _notify(self, topic: str, partition: int, old: Any, new: Any) -> None:
        for listener in self._listeners:
            try:
                listener(topic, partition, old, new)
            except Exception:  # one listener's bug must not freeze the view
                log.exception("Partition state listener failed for %s-%d", topic, partition)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Open the session and read everything once (raises ZkError), then follow."""
        await self.client.start()
        await self._resync()
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        self._retry.cancel()
        if self._task is not None:
            self._task.cancel()
        await asyncio.gather(*(t for t in (self._task,) if t is not None),
                             return_exceptions=True)
        await self.client.close()

    async def _run(self) -> None:
        while True:
            event = await self.client.events.get()
            try:
                if isinstance(event, SessionEvent):
                    if event.state in ("CONNECTED", "RESYNC"):
                        await self._resync()  # a lost session lost its watches too
                elif event.path is not None:  # None: kazoo dropping the watches of a lost
                    await self._apply(event)  # session; the next CONNECTED reads it all
            except ZkError as e:
                log.warning("ZooKeeper error while following the cluster (%r): re-reading", e)
                self._schedule_resync()
            except Exception:  # the task must outlive any surprise, or the view freezes
                log.exception("Cluster view update failed: re-reading")
                self._schedule_resync()
            else:
                self._retry.reset()

    def _schedule_resync(self) -> None:
        self._retry.schedule(self.client.events.put_nowait, _RESYNC)

    # --- reading ZooKeeper --------------------------------------------------------------

    async def _resync(self) -> None:
        await self._read_controller()
        await self._read_topics(everything=True)

    async def _apply(self, event: WatchEvent) -> None:
        path = event.path
        if path == zkdata.CONTROLLER:
            await self._read_controller()
        elif path == zkdata.TOPICS:
            await self._read_topics()
        elif path.startswith(zkdata.TOPICS + "/"):
            parts = path[len(zkdata.TOPICS) + 1:].split("/")
            if len(parts) == 1 and parts[0] in self._topics:
                await self._read_assignment(parts[0])
            elif len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state" \
                    and parts[0] in self._topics:
                await self._read_state(parts[0], int(parts[2]))

    async def _read_controller(self) -> None:
        try:
            data, _ = await self.client.get(zkdata.CONTROLLER, watch=True)
            controller = zkdata.ControllerRegistration.decode(data).broker_id
        except NoNode:
            if await self.client.exists(zkdata.CONTROLLER, watch=True) is not None:
                return await self._read_controller()  # created meanwhile
            controller = NO_NODE
        if controller != self._controller:
            log.info("Controller is broker %d (was %d)", controller, self._controller)
            self.controller_changes += controller != NO_NODE
        self._controller = controller

    async def _read_topics(self, everything: bool = False) -> None:
        """The topic list; the assignments (and states) of new topics, or of all."""
        names = set(await self.client.children(zkdata.TOPICS, watch=True))
        for gone in set(self._topics) - names:
            self._forget(gone)
        for name in sorted(names if everything else names - set(self._topics)):
            await self._read_assignment(name)

    def _forget(self, name: str) -> None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            for p in topic.assignment.partitions:
                old = self._states.pop((name, p), None)
                self._versions.pop((name, p), None)
                if old is not None:
                    self._notify(name, p, old, None)
            log.info("Topic %s is gone from ZooKeeper", name)

    async def _read_assignment(self, name: str) -> None:
        try:
            data, _ = await self.client.get(zkdata.topic_path(name), watch=True)
        except NoNode:  # deleted meanwhile: the children watch tells
            self._forget(name)
            return
        assignment = zkdata.TopicAssignment.decode(data)
        topic = ClusterTopic(name, topic_uuid(assignment.topic_id), name in INTERNAL_TOPICS,
                             assignment)
        states = {}
        for p in sorted(assignment.partitions):
            states[p] = await self._get_state(name, p)  # (state, version)
        if any(self.node_id in replicas for replicas in assignment.partitions.values()):
            await self._ensure_local_log(topic)
        old = self._topics.get(name)
        if old is not None:
            self._by_id.pop(old.topic_id, None)
        self._topics[name] = topic
        self._by_id[topic.topic_id] = topic
        for p, (state, version) in states.items():
            before = old.assignment.partitions.get(p) if old is not None else None
            if before is not None and before != assignment.partitions[p] and \
                    state is not None and state == self._states.get((name, p)):
                self._notify(name, p, state, state)  # same state, new replicas (reassigned)
            self._set_state(name, p, state, version)
        if old is not None:
            await self._drop_if_moved_away(old, topic)

    async def _drop_if_moved_away(self, old: ClusterTopic, new: ClusterTopic) -> None:
        """Replicas a reassignment took off this broker (no longer followed: listeners ran
        above) go, as by Kafka's StopReplica delete=true: the topic's local log, or with
        other partitions left here, the moved ones' data (empty_local_partition)."""
        before, after = ({p for p, r in t.assignment.partitions.items() if self.node_id in r}
                         for t in (old, new))
        if before and not after:
            log.info("No replica of %s left on this broker: deleting its local log", new.name)
            return await drop_local_topic(self._broker, new.name)
        for p in sorted(before - after):
            empty_local_partition(self._broker, new.name, p)

    async def _get_state(self, topic: str, partition: int
                         ) -> tuple[zkdata.PartitionState | None, int]:
        """The state znode's content (None while the controller has not written it) and
        version, its watch armed either way."""
        path = zkdata.partition_state_path(topic, partition)
        for _ in range(3):  # bounded: a node created between get and exists is read again
            try:
                data, stat = await self.client.get(path, watch=True)
                return zkdata.PartitionState.decode(data), stat.version
            except NoNode:
                if await self.client.exists(path, watch=True) is None:
                    return None, -1
        return None, -1

    async def _read_state(self, topic: str, partition: int) -> None:
        self._set_state(topic, partition, *await self._get_state(topic, partition))

    def _set_state(self, topic: str, partition: int, state: zkdata.PartitionState | None,
                   version: int = -1) -> None:
        key = (topic, partition)
        old = self._states.get(key)
        if state is None:
            self._states.pop(key, None)
            self._versions.pop(key, None)
        else:
            self._states[key] = state
            self._versions[key] = version
        if old != state:
            self._notify(topic, partition, old, state)
        if old != state and state is not None:
            log.info("Partition %s-%d: leader %d, leader epoch %d, isr %s", topic, partition,
                     state.leader, state.leader_epoch, list(state.isr))

    # --- the leader's own ISR writes (Kafka's ZooKeeper mode before KIP-497) ---------------

    def partition_states(self) -> list[tuple[str, int, zkdata.PartitionState]]:
        """Every known state znode, as (topic, partition, state)."""
        return [(t, p, s) for (t, p), s in self._states.items()]

    async def write_isr(self, topic: str, partition: int, isr: tuple[int, ...]) -> bool:
        """As the partition's leader, write `isr` to its state znode, conditionally on the
        version this view holds (Kafka's ReplicationUtils.updateLeaderAndIsr: leader, leader
        epoch and controller epoch kept), then queue an isr_change_notification for the
        controller. False when the write lost (the controller, or a newer leader, wrote
        since): the state is read again, and its watch brings the new state to the
        listeners; the caller decides again from that, never retrying blindly."""
        key = (topic, partition)
        current, version = self._states.get(key), self._versions.get(key, -1)
        if current is None or current.leader != self.node_id or version < 0:
            return False
        new = zkdata.PartitionState(current.leader, current.leader_epoch, tuple(isr),
                                    current.controller_epoch, current.leader_recovery_state)
        path = zkdata.partition_state_path(topic, partition)
        try:
            stat = await self.client.set(path, new.encode(), version)
        except ZkError as e:
            log.info("ISR write of %s-%d at version %d failed: %r", topic, partition, version, e)
            if isinstance(e, (BadVersion, NoNode)):  # lost: else a new session re-reads
                await self._read_state(topic, partition)
            return False
        if self._versions.get(key) == version:  # no newer state read meanwhile
            self._set_state(topic, partition, new, stat.version)
        try:  # the controller learns of it (Kafka's propagateIsrChanges)
            await self.client.create(f"{zkdata.ISR_CHANGE_NOTIFICATION}/"
                                     f"{zkdata.ISR_CHANGE_PREFIX}", zkdata.encode_isr_change(
                                         [key]), sequence=True, makepath=True)
        except ZkError as e:
            log.warning("isr_change_notification of %s-%d not written: %r", *key, e)
        return True

    async def _ensure_local_log(self, topic: ClusterTopic) -> None:
        """The local logs of a topic this broker holds a replica of (all its partitions:
        the log manager keeps a topic's partitions dense), with the cluster's topic id."""
        count = max(topic.assignment.partitions, default=-1) + 1
        logs = self._broker.logs
        local = logs.get(topic.name)
        if local is None:
            try:  # the topic's configs, as the creating controller wrote them
                configs = zkdata.decode_topic_config(
                    (await self.client.get(zkdata.topic_config_path(topic.name)))[0])
            except NoNode:
                configs = {}
            local = await logs.adopt_topic_async(topic.name, count, topic.topic_id,
                                                 topic.internal, configs or None)
        elif local.topic_id != topic.topic_id and topic.topic_id != ZERO_UUID:
            log.error("Local topic %s has id %s, the cluster's has %s: leaving it alone",
                      topic.name, local.topic_id, topic.topic_id)
            return
        elif len(local.partitions) < count:
            await logs.add_partitions_async(topic.name, count)
        self._broker._attach(local.partitions)  # producer state, as Broker.ensure_topic

    # --- ClusterView --------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._controller

    def brokers(self, listener: Listener | None) -> Sequence[BrokerNode]:
        out = []
        for member in self._members.values():
            node = self._node(member.registration, listener)
            if node is not None:
                out.append(node)
        return out

    def broker(self, node_id: int, listener: Listener | None) -> BrokerNode | None:
        member = self._members.get(node_id)
        return self._node(member.registration, listener) if member is not None else None

    @staticmethod
    def _node(reg: zkdata.BrokerRegistration, listener: Listener | None) -> BrokerNode | None:
        """The broker at its endpoint on `listener` (None: its first); None without one, as
        Kafka leaves out brokers that lack the request's listener."""
        for e in reg.endpoints:
            if listener is None or e.listener == listener.name:
                return BrokerNode(reg.broker_id, e.host, e.port, reg.rack)
        return None

    def topic_names(self) -> Sequence[str]:
        return list(self._topics)

    def topic(self, name: str) -> ClusterTopic | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> ClusterTopic | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        t = self._topics.get(topic)
        if t is None:
            return None
        replicas = t.assignment.partitions.get(partition)
        if replicas is None:
            return None
        state = self._states.get((topic, partition))
        members = self._members
        offline = tuple(r for r in replicas if r not in members)
        if state is None:  # assigned, not yet elected by the controller
            return PartitionState(NO_NODE, -1, replicas, (), offline)
        return PartitionState(state.leader, state.leader_epoch, replicas, state.isr, offline)

    def partitions(self, topic: str) -> Sequence[PartitionState]:
        t = self._topics.get(topic)
        if t is None:
            return ()
        return [s for p in sorted(t.assignment.partitions)
                if (s := self.partition(topic, p)) is not None]

    def is_leader(self, topic: str, partition: int) -> bool:
        state = self._states.get((topic, partition))
        return state is not None and state.leader == self.node_id

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int) -> int:
        """A request for the partition's leader: ErrorCode.none when this broker leads it at
        the request's epoch. Kafka's order (ReplicaManager.getPartitionOrError, then
        Partition.checkCurrentLeaderEpoch, then the leader check): unknown partition, not a
        replica here, the epoch (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH),
        not the leader."""
        t = self._topics.get(topic)
        replicas = t.assignment.partitions.get(partition) if t is not None else None
        if replicas is None:
            return ErrorCode.unknown_topic_or_partition
        state = self._states.get((topic, partition))
        if self.node_id not in replicas or state is None:
            return ErrorCode.not_leader_or_follower
        if current_leader_epoch != NO_EPOCH:
            if current_leader_epoch < state.leader_epoch:
                return ErrorCode.fenced_leader_epoch
            if current_leader_epoch > state.leader_epoch:
                return ErrorCode.unknown_leader_epoch
        if state.leader != self.node_id:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self._states.get((topic, partition))
        return state.leader_epoch if state is not None else -1


async def start_view(broker: Any, membership: Any, config: Any) -> ZkClusterView:
    """The view of a broker that has joined the cluster, read once and following. On
    failure the membership is closed too (the start fails: its registration goes)."""
    client = ZkClient(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                      config["zookeeper.connection.timeout.ms"])
    view = ZkClusterView(broker, membership, client)
    try:
        await view.start()
    except BaseException as e:
        await view.close()
        await membership.close()
        if isinstance(e, ZkError):
            raise ClusterError(f"ZooKeeper {client.connect} failed while reading the "
                               f"cluster's state: {e!r}") from e
        raise
    return view
