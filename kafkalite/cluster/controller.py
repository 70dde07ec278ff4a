# The cluster controller, as Kafka's ZooKeeper-mode KafkaController: a component every broker
# runs, which acts only while its broker holds the ephemeral /controller. It contends for
# /controller (zk.elect_controller bumps /controller_epoch in the same multi) at start and
# whenever /controller goes; the winner loads the cluster state from ZooKeeper and then keeps
# the partition state znodes right as topics appear or grow and brokers come and go.
#
# Fencing: every write is multi_fenced on the /controller_epoch version this controller set,
# and conditional on the state znode's version (the partition epoch). BADVERSION means a
# leader changed the ISR meanwhile: re-read, re-decide, retry (bounded). ControllerMoved means
# another broker is controller: resign and stop acting. A controller whose session expired
# cannot write either, and contends again once kazoo has a new session.
#
# Work runs one item at a time from a queue (Kafka's ControllerEventManager), so decisions
# never interleave. The decisions are Kafka's (decisions.py and the transitions below): a new
# partition's leader is its first live replica and its ISR all live replicas; a dead leader is
# replaced by the first live ISR member in assignment order (offline election; none: leader
# -1 and the partition stays offline unless unclean.leader.election.enable); a dead replica
# then leaves every ISR it is in (OfflineReplica), except the last member, which stays;
# each change bumps the leader epoch. A returning broker leads the offline partitions whose
# ISR holds it. A broker registered again under a new broker epoch (its znode's czxid) before
# the controller saw it go is a bounced broker: it failed and restarted (Kafka's BrokerChange),
# so it is handled as both. Controlled shutdown (controlled_shutdown.py) and the preferred-
# leader elections (preferred.py: ElectLeaders, /admin/preferred_replica_election, the
# automatic rebalance on the injected clock) run in the same queue, as do the leaders'
# /isr_change_notification announcements (their states re-read, the notifications deleted)
# and partition reassignments (reassignment.py), which those announcements complete.
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from ..clock import Clock, SystemClock
from ..wire.errors import ErrorCode, KafkaError
from . import preferred, reassignment, zkdata
from .admin_zk import delete_topic_znodes
from .decisions import initial_state, offline_election, remove_replica  # noqa: F401 (API)
from .fenced_writes import UPDATE_ATTEMPTS, FencedWrites, PartitionKey  # noqa: F401
from .live_brokers import LiveBrokers, ZkLiveBrokers
from .zk import ControllerMoved, NoNode, SessionEvent, ZkClient, ZkError

log = logging.getLogger("kafkalite.controller")
T = TypeVar("T")
UNCLEAN = "unclean.leader.election.enable"


# --- the controller --------------------------------------------------------------------------

class Controller(FencedWrites):
    """Runs on every broker; `active` while this broker is the controller."""

    def __init__(self, zk: ZkClient, broker_id: int, live: LiveBrokers | None = None,
                 clock: Clock | None = None, unclean: bool = False,
                 auto_rebalance: bool = False, imbalance_interval_ms: int = 300_000,
                 imbalance_percentage: int = 10):
        self.zk = zk
        self.broker_id = broker_id
        self._own_live = live is None
        self.live_source: LiveBrokers = live if live is not None else ZkLiveBrokers(zk)
        self.clock = clock or SystemClock()
        self.unclean_default = unclean
        self.auto_rebalance = auto_rebalance
        self.imbalance_interval_ms = imbalance_interval_ms
        self.imbalance_percentage = imbalance_percentage
        self._rebalance_timer: Any = None
        self.epochs: dict[int, int] = {}  # live broker -> broker epoch, as last handled
        self.shutting_down: dict[int, int] = {}  # broker -> its epoch at the request
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self.live: set[int] = set()
        self.topics: dict[str, zkdata.TopicAssignment] = {}
        self.unclean: dict[str, bool] = {}
        self.states: dict[PartitionKey, tuple[zkdata.PartitionState, int]] = {}
        self._work: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self._events: asyncio.Queue | None = None

    async def start(self) -> None:
        self._events = self.zk.subscribe()
        if self._own_live:  # a broker's membership has made the paths and holds the watch
            await self.zk.ensure_persistent_paths()
            await self.live_source.start()  # type: ignore[attr-defined]
        self.live_source.add_listener(self._on_live_change)
        self._tasks = [asyncio.create_task(self._pump(self._events)),
                       asyncio.create_task(self._process())]
        self._work.put_nowait(("elect",))

    async def stop(self) -> None:
        """Stop acting (the /controller znode goes with the session, not here)."""
        self.live_source.remove_listener(self._on_live_change)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._events is not None:
            self.zk.unsubscribe(self._events)
        if self._own_live:
            await self.live_source.stop()  # type: ignore[attr-defined]
        self._resign()
        while not self._work.empty():  # nobody will run them: their callers must not hang
            item = self._work.get_nowait()
            if item[0] == "call" and not item[2].done():
                item[2].set_exception(KafkaError(ErrorCode.not_controller, "stopped"))

    async def submit(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run `fn` in the controller's turn, after the work queued before it: admin actions
        (elections, reassignments) see a settled state. NOT_CONTROLLER when not active."""
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._work.put_nowait(("call", fn, fut))
        return await fut

    def electable(self) -> set[int]:
        """Brokers that may lead: live and not shutting down (Kafka's liveBrokerIds)."""
        return self.live - set(self.shutting_down)

    async def broker_epochs(self) -> dict[int, int]:
        """{live broker: broker epoch}: the membership's when it keeps them, else read."""
        members = getattr(self.live_source, "members", None)
        if members is not None:
            return {b: m.epoch for b, m in members.items()}
        out = {}
        for b in self.live_source.live_brokers():
            st = await self.zk.exists(zkdata.broker_path(b))
            if st is not None:
                out[b] = st.czxid
        return out

    def _on_live_change(self) -> None:
        self._work.put_nowait(("brokers",))

    async def _pump(self, events: asyncio.Queue) -> None:
        """ZooKeeper notifications -> work items."""
        while True:
            event = await events.get()
            if isinstance(event, SessionEvent):
                if event.state == "LOST":
                    self._work.put_nowait(("resign",))
                elif event.state == "CONNECTED":
                    self._work.put_nowait(("elect",))
            elif event.path is None:  # kazoo drops every watch when the connection goes:
                continue  # the CONNECTED that follows re-arms them (elect re-reads it all)
            elif event.path == zkdata.CONTROLLER:
                self._work.put_nowait(("controller_changed",))
            elif event.path == zkdata.TOPICS:
                self._work.put_nowait(("topics",))
            elif event.path == zkdata.DELETE_TOPICS:
                self._work.put_nowait(("deletions",))
            elif event.path == zkdata.PREFERRED_REPLICA_ELECTION:
                self._work.put_nowait(("preferred",))
            elif event.path == zkdata.ISR_CHANGE_NOTIFICATION:
                self._work.put_nowait(("isr_changes",))
            elif event.path == zkdata.REASSIGN_PARTITIONS:
                self._work.put_nowait(("reassign", event.type == "CREATED"))
            elif event.path.startswith(zkdata.TOPICS + "/") and event.path.count("/") == 3:
                self._work.put_nowait(("topic", event.path.rsplit("/", 1)[1]))

    async def _process(self) -> None:
        while True:
            item = await self._work.get()
            try:
                await self._handle(item)
            except ControllerMoved as e:
                log.info("broker %d: no longer controller: %s", self.broker_id, e)
                self._resign()
                self._work.put_nowait(("controller_changed",))
            except ZkError as e:  # connection trouble: the session events bring us back
                log.warning("controller work %s failed: %r", item[0], e)
            except Exception:  # noqa: BLE001 - one bad item must not stop the controller
                log.exception("controller work %s failed", item[0])

    async def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "call":
            await self._call(item[1], item[2])
        elif kind == "elect":
            await self._elect()
        elif kind == "resign":
            self._resign()
        elif kind == "controller_changed":
            st = await self.zk.exists(zkdata.CONTROLLER, watch=True)
            if st is None:
                await self._elect()
            elif self.active and st.ephemeral_owner != self.zk.session_id:
                self._resign()
        elif not self.active:
            return
        elif kind == "brokers":
            await self._brokers_changed()
        elif kind == "topics":
            await self._topics_changed()
        elif kind == "topic":
            await self._topic_changed(item[1])
        elif kind == "deletions":
            await self.delete_marked_topics()
        elif kind == "preferred":
            await preferred.znode_election(self)
        elif kind == "isr_changes":
            await self.isr_changes()
        elif kind == "reassign":
            await reassignment.znode_reassignment(self, item[1])
        elif kind == "rebalance":
            self._schedule_rebalance(self.imbalance_interval_ms)
            await preferred.auto_rebalance(self, self.imbalance_percentage)

    async def _call(self, fn: Callable[[], Awaitable[Any]], fut: asyncio.Future) -> None:
        if not self.active:
            fut.set_exception(KafkaError(ErrorCode.not_controller,
                                         f"broker {self.broker_id} is not the controller"))
            return
        try:
            fut.set_result(await fn())
        except asyncio.CancelledError:  # stop() meanwhile: the caller must not hang
            if not fut.done():
                fut.set_exception(KafkaError(ErrorCode.not_controller, "stopped"))
            raise
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
            if isinstance(e, ControllerMoved):
                raise

    def _resign(self) -> None:
        if self.active:
            log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.epoch)
        self.active = False
        self._forget_all()
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None

    def _schedule_rebalance(self, delay_ms: int) -> None:
        """The next automatic imbalance check (Kafka's AutoPreferredReplicaLeaderElection)."""
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
        self._rebalance_timer = self.clock.call_later(delay_ms, self._work.put_nowait,
                                                      ("rebalance",)) \
            if self.auto_rebalance and self.active else None

    def _forget_all(self) -> None:
        self.topics.clear()
        self.unclean.clear()
        self.states.clear()
        self.shutting_down.clear()

    # --- election and failover ---------------------------------------------------------------

    async def _elect(self) -> None:
        if not self.active:
            try:
                self.epoch, self.epoch_zk_version = await self.zk.elect_controller(
                    self.broker_id, self.clock.wall_ms())
            except ControllerMoved:
                if await self.zk.exists(zkdata.CONTROLLER, watch=True) is None:
                    self._work.put_nowait(("elect",))  # gone already: contend again
                return
            self.active = True
            log.info("broker %d is controller, epoch %d", self.broker_id, self.epoch)
        # Kafka's onControllerFailover: load, then bring every partition online that can be.
        # Also after a reconnection within the session (still active): a write that failed
        # on the lost connection is decided again from what ZooKeeper holds now.
        await self.zk.exists(zkdata.CONTROLLER, watch=True)
        self._forget_all()
        self.live = set(self.live_source.live_brokers())
        self.epochs = await self.broker_epochs()
        for topic in await self.zk.children(zkdata.TOPICS, watch=True):
            await self._load_topic(topic)
        await self._offline_replicas()
        await self._bring_online(list(self.states) + self._uninitialized())
        await self.delete_marked_topics()
        await self.isr_changes()
        await reassignment.resume(self)  # the topic znodes', then /admin/reassign_partitions
        await preferred.znode_election(self)
        self._schedule_rebalance(preferred.FIRST_CHECK_DELAY_MS)

    async def _offline_replicas(self) -> None:
        """Kafka's replicaStateMachine.startup, before the partitions': replicas on brokers
        that are not live (they died while no controller ran, or under the previous one)
        go offline, out of the ISR and no longer leading (remove_replica)."""
        for replica in sorted({r for s, _ in self.states.values() for r in s.isr} - self.live):
            for key in [k for k, (s, _) in self.states.items() if replica in s.isr]:
                await self.update_state(
                    key, lambda s, r=replica: remove_replica(s, r, self.epoch))

    def _uninitialized(self) -> list[PartitionKey]:
        return [(t, p) for t, a in self.topics.items() for p in sorted(a.partitions)
                if (t, p) not in self.states]

    async def _load_topic(self, topic: str) -> bool:
        """Read a topic's assignment (watched), config and partition states; False when it
        is gone."""
        try:
            data, _ = await self.zk.get(zkdata.topic_path(topic), watch=True)
        except NoNode:
            self._forget_topic(topic)
            return False
        self.topics[topic] = zkdata.TopicAssignment.decode(data)
        try:
            config = zkdata.decode_topic_config((await self.zk.get(
                zkdata.topic_config_path(topic)))[0])
        except NoNode:
            config = {}
        self.unclean[topic] = config.get(UNCLEAN, str(self.unclean_default)).lower() == "true"
        for p in self.topics[topic].partitions:
            if (topic, p) not in self.states:
                await self.read_state((topic, p))
        return True

    def _forget_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)
        self.unclean.pop(topic, None)
        for key in [k for k in self.states if k[0] == topic]:
            del self.states[key]

    async def _bring_online(self, keys: Sequence[PartitionKey]) -> None:
        """New partitions get their first state; offline ones (leader not live) a leader."""
        registered = None
        for key in keys:
            if key not in self.states:
                if registered is None:  # read after the topic's znode: every broker that
                    # registered before it counts, whether or not its watch has fired yet
                    registered = {int(c) for c in await self.zk.children(zkdata.BROKER_IDS)
                                  if c.isdigit()}
                await self._initialize(key, registered)
            else:
                await self.update_state(key, self._election(key))

    def _election(self, key: PartitionKey) -> Callable[[zkdata.PartitionState],
                                                       zkdata.PartitionState | None]:
        replicas = self.topics[key[0]].partitions[key[1]]
        return lambda s: offline_election(s, replicas, self.electable(), self.epoch,
                                          self.unclean.get(key[0], self.unclean_default))

    # --- reactions --------------------------------------------------------------------------

    async def _topics_changed(self) -> None:
        topics = set(await self.zk.children(zkdata.TOPICS, watch=True))
        for gone in set(self.topics) - topics:
            self._forget_topic(gone)
        for topic in sorted(topics - set(self.topics)):
            if await self._load_topic(topic):
                await self._bring_online(self._uninitialized())

    async def _topic_changed(self, topic: str) -> None:
        """The assignment changed (CreatePartitions): new partitions get their state."""
        if topic in self.topics and await self._load_topic(topic):
            await self._bring_online([k for k in self._uninitialized() if k[0] == topic])

    async def sync_topic(self, topic: str) -> None:
        """Take in the topic's assignment now rather than at its watch (an admin call in the
        controller's turn, whose answer waits for the partitions' states)."""
        if await self._load_topic(topic):
            await self._bring_online([k for k in self._uninitialized() if k[0] == topic])

    async def delete_marked_topics(self) -> None:
        """Delete every topic marked under /admin/delete_topics (re-arming the watch):
        its znodes go in one fenced multi, the mark with them (admin_zk). A topic being
        reassigned waits, marked (Kafka's TopicDeletionManager: ineligible for deletion);
        the reassignment's completion or cancel calls back here (reassignment._complete)."""
        moving = {t for t, _ in reassignment.ongoing(self, None)}
        for topic in await self.zk.children(zkdata.DELETE_TOPICS, watch=True):
            if topic in moving:
                log.info("controller: topic %s is being reassigned: deletion waits", topic)
                continue
            await delete_topic_znodes(self.zk, topic, self.epoch_zk_version)
            self._forget_topic(topic)
            log.info("controller: deleted topic %s", topic)

    async def isr_changes(self) -> None:
        """Leaders announce the ISR changes they wrote under /isr_change_notification (Kafka's
        IsrChangeNotification): re-read those partitions' states, then delete the
        notifications (watch re-armed), so they never pile up; then complete the
        reassignments whose targets are all in sync."""
        for name in sorted(await self.zk.children(zkdata.ISR_CHANGE_NOTIFICATION, watch=True)):
            path = f"{zkdata.ISR_CHANGE_NOTIFICATION}/{name}"
            try:
                changed = zkdata.decode_isr_change((await self.zk.get(path))[0])
            except NoNode:
                continue
            except (ValueError, KeyError, TypeError) as e:  # unreadable: logged, deleted
                log.warning("controller: ignoring malformed %s: %s", path, e)
                changed = set()
            for key in sorted(changed):
                if key in self.states:
                    await self.read_state(key)
            try:
                await self.zk.delete(path)
            except NoNode:
                pass
        await reassignment.check_completions(self)  # new ISRs may complete reassignments

    async def _brokers_changed(self) -> None:
        live = set(self.live_source.live_brokers())
        epochs = await self.broker_epochs()
        bounced = {b for b in live & self.live
                   if b in epochs and self.epochs.get(b, epochs[b]) != epochs[b]}
        dead, born = (self.live - live) | bounced, (live - self.live) | bounced
        self.epochs = epochs
        for b in dead:  # gone or restarted: its shutdown is over
            self.shutting_down.pop(b, None)
        self.live = live - bounced
        if bounced:
            log.info("controller: brokers %s bounced (new broker epochs)", sorted(bounced))
        if dead:  # Kafka's onBrokerFailure: elect first, then take the dead out of ISRs
            log.info("controller: brokers %s left", sorted(dead))
            for key in [k for k, (s, _) in self.states.items() if s.leader in dead]:
                await self.update_state(key, self._election(key))
            for replica in sorted(dead):
                for key in [k for k, (s, _) in self.states.items() if replica in s.isr]:
                    await self.update_state(
                        key, lambda s, r=replica: remove_replica(s, r, self.epoch))
        self.live = live
        if born:  # onBrokerStartup: offline partitions may have a leader again
            log.info("controller: brokers %s joined", sorted(born))
            offline = [k for k, (s, _) in self.states.items() if s.leader not in live]
            await self._bring_online(offline + self._uninitialized())
