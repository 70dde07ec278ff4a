# The broker: state shared by all handlers, and request dispatch (bytes in, buffers out).
#
# dispatch() is sans-I/O: server.py hands it a frame and writes back what it returns.
# A frame that cannot be parsed, an unknown API key, or an unsupported version of an API
# other than ApiVersions raises MalformedRequest: the server closes that connection, as
# Apache Kafka does. ApiVersions at an unknown version is answered at v0 with
# UNSUPPORTED_VERSION and the supported list so that the client can retry.
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..clock import Clock, SystemClock
from ..cluster.view import ClusterView, SingleNodeView
from ..config import BrokerConfig
from ..coordinator.groups_coordinator import GroupCoordinator
from ..coordinator.offsets_log import TOPIC as OFFSETS_TOPIC, NotReplicated
from ..coordinator.producer_state import ProducerStates
from ..coordinator.producers import PartitionProducers, ProducerIdAllocator
from ..coordinator.share_state_log import TOPIC as SHARE_STATE_TOPIC
from ..coordinator.transactions_coordinator import TransactionCoordinator
from ..coordinator.transactions_log import TOPIC as TXN_TOPIC
from ..log.flusher import fsync_all
from ..log.manager import LogManager, Topic
from ..log.partition import PartitionLog
from ..security.acl_check import open_authorizer
from ..security.sasl_scram import bootstrap_scram_users
from ..security.scram_store import ScramStore
from ..wire.codec import decode_request, encode, is_flexible
from ..wire.errors import ErrorCode, KafkaError, MalformedRequest
from ..wire.header import parse_fixed, response_header, skip_tagged_fields
from .build import has_field, ms
from .dynamic_configs import open_configs
from .fetch_sessions import FetchSessionCache
from .handlers._configs import group_store
from .quotas import ClientQuotas
from .registry import HANDLERS
from .unsupported import refusal
from .stats import BrokerStats
from .waiters import AppendNotifier

log = logging.getLogger("kafkalite.broker")

API_VERSIONS_KEY = 18
# The replication factor each internal topic is created with in a cluster (share groups'
# state is not served in a cluster yet).
INTERNAL_RF = {OFFSETS_TOPIC: "offsets.topic.replication.factor",
               TXN_TOPIC: "transaction.state.log.replication.factor"}


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    listener: Any = None  # security.listeners.Listener the request came through
    principal: str = "User:ANONYMOUS"
    # Set by handlers that meter bytes (Produce, Fetch): the longest throttle wins.
    throttle_ms: int = 0


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None):
        from . import handlers  # noqa: F401  (registers every handler module)
        self.config = config
        self.node_id = config.node_id
        self.host, self.port = config.advertised()
        self.logs = LogManager(config)
        # Who leads what, and which brokers exist: handlers ask here, never invent it.
        self.view: ClusterView = SingleNodeView(self)
        self.notifier = AppendNotifier()
        self.replication: Any = None  # cluster.replication.Replication in a cluster
        self.pids: ProducerIdAllocator | None = None
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.groups: GroupCoordinator | None = None  # set by open()
        self.transactions: TransactionCoordinator | None = None  # set by open()
        self.share_groups: Any = None  # the ShareCoordinator (KIP-932), set by open()
        self.producers = ProducerStates(config, self.clock)
        self.fetch_sessions = FetchSessionCache(
            self.clock, config["max.incremental.fetch.session.cache.slots"])
        self.stats = BrokerStats()
        self.quotas = ClientQuotas(None, self.clock)
        self.scram = ScramStore(None)
        self.authorizer: Any = None  # security.acls.Authorizer when one is configured (open())
        # Called with a topic's name after it is deleted (committed offsets, sessions…).
        self.topic_deleted_listeners: list[Callable[[str], None]] = []
        # Called as (topic, partition, producer_id, commit) after each transaction marker.
        self.txn_marker_listeners: list[Callable[[str, int, int, bool], None]] = []
        self.auto_creator: Any = None  # cluster.auto_create.AutoCreator in a cluster
        self.marker_sender: Any = None  # cluster.marker_sender.MarkerSender in a cluster
        self.txn_verifier: Any = None  # cluster.txn_verifier.TxnVerifier in a cluster
        self.started_at = time.time()
        self.closing = False
        self._next_retention_ms = 0  # set by open()

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        open_configs(self.config)
        self.logs.open()
        self.logs.start_cleaner(self.clock)
        self._next_retention_ms = (self.clock.monotonic_ms()
                                   + self.config["log.retention.check.interval.ms"])
        state_dir = os.path.join(self.logs.data_dir, ".kafkalite")
        self.pids = ProducerIdAllocator(os.path.join(state_dir, "producer-ids"))
        self.quotas = ClientQuotas(state_dir, self.clock)
        self.quotas.load()
        self.scram = ScramStore(state_dir)
        self.scram.load()
        self.authorizer = open_authorizer(self.config, state_dir)
        bootstrap_scram_users(self.scram, self.config["kafkalite.sasl.scram.users"])
        t0 = time.monotonic()
        replayed = sum(self._load_producer_state(p) for p in self.logs.all_partitions())
        log.info("Loaded producer state in %.3fs (%d batch headers replayed)",
                 time.monotonic() - t0, replayed)
        groups = GroupCoordinator(self.config, self.logs, self.create_topic,
                                  self.notifier.notify, lambda: self.closing, clock=self.clock)
        self.topic_deleted_listeners.append(groups.on_topic_deleted)
        self.txn_marker_listeners.append(groups.on_txn_marker)
        self.groups = groups
        groups.consumer_coordinator.overrides = lambda gid: group_store(self).get(gid)
        groups.open()
        self.transactions = TransactionCoordinator(
            self.config, self.logs, self.create_topic, clock=self.clock,
            allocate_pid=self.pids.allocate, write_markers=self._write_markers,
            durable=self._txn_log_durable, notify=self.notifier.notify)
        self.transactions.open()
        replication = lambda: self.replication  # noqa: E731 - set once the cluster view is up
        groups.store.replication = self.transactions.log.replication = replication
        groups.store.write_timeout_ms = self.config["offsets.commit.timeout.ms"]
        self.transactions.log.write_timeout_ms = 30000  # Kafka's request.timeout.ms
        from .handlers._share import make_share_coordinator
        self.share_groups = make_share_coordinator(self)
        groups.share_lookup = self.share_groups.has_group  # one group-id namespace
        self.share_groups.attach_offsets(groups)  # membership kept in __consumer_offsets
        self.share_groups.open()

    def close(self, clean: bool = True) -> None:
        self.closing = True
        self.notifier.wake_all()
        if self.groups is not None:
            self.groups.close()
        if self.transactions is not None:
            self.transactions.close()
        if self.share_groups is not None:
            self.share_groups.close()
        self.producers.close(self.logs.all_partitions() if clean else ())
        self.logs.close(clean=clean)

    # --- housekeeping ---------------------------------------------------------------------

    @property
    def tick_interval_ms(self) -> int:
        """How often tick() wants to run: flush.ms and session sweeps are checked at this
        granularity, retention never more often than log.retention.check.interval.ms."""
        return min(1000, self.config["log.retention.check.interval.ms"])

    def tick(self, now_ms: int) -> None:
        """Periodic housekeeping; `now_ms` is the clock's monotonic reading. Time flushes,
        retention every log.retention.check.interval.ms (the first one interval after
        open()), the group coordinator's sweep, idle fetch-session eviction. A failing
        task is logged and retried at the next tick without stopping the others."""
        wall = self.clock.wall_ms()  # flush.ms and retention compare record/flush times
        self._guarded("time-based flush", self.logs.flush_by_time, wall)
        if now_ms >= self._next_retention_ms:
            self._next_retention_ms = now_ms + self.config["log.retention.check.interval.ms"]
            self._guarded("retention", self.logs.apply_retention, wall)
        if self.groups is not None:
            self._guarded("group housekeeping", self.groups.tick, wall)
        self._guarded("producer expiry", self.expire_producers, wall)
        if self.transactions is not None:
            self._guarded("transaction timeouts", self.transactions.tick, now_ms)
        self.fetch_sessions.evict_idle(now_ms)
        if self.logs.cleaner is not None:
            self._guarded("log cleaner swaps", self.logs.cleaner.tick, now_ms)

    @staticmethod
    def _guarded(what: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("Housekeeping (%s) failed; will retry", what)

    def _load_producer_state(self, p: PartitionLog) -> int:
        """From the newest snapshot and the batch headers after it; returns how many
        headers were replayed."""
        return self.producers.load(p)

    def producer_state(self, p: PartitionLog) -> PartitionProducers:
        return self.producers.state(p)

    def expire_producers(self, now_ms: int | None = None) -> int:
        """For the periodic tick: see ProducerStates.expire (`now_ms` is wall-clock time)."""
        return self.producers.expire(self.logs.all_partitions(), now_ms)

    async def sync(self, partitions) -> None:
        """fsync what `partitions` hold (kafkalite.fsync.before.ack), off the event loop and
        on duplicated descriptors: a roll or retention running meanwhile on the loop may
        close the originals. Raises OSError."""
        fds = [fd for p in {id(p): p for p in partitions}.values() for fd in p.sync_handles()]
        await asyncio.get_running_loop().run_in_executor(None, fsync_all, fds)

    async def _write_markers(self, producer_id: int, epoch: int, coordinator_epoch: int,
                             commit: bool, partitions: list) -> dict:
        if self.marker_sender is not None:  # a cluster: each partition's leader writes it
            return await self.marker_sender.write(producer_id, epoch, coordinator_epoch,
                                                  commit, partitions)
        from .txn_markers import write_markers  # the log side's (txn_spec.md 1)
        return await write_markers(self, producer_id, epoch, coordinator_epoch, commit,
                                   partitions)

    async def _txn_log_durable(self, partition: int) -> None:
        """A __transaction_state write is durable as an acks=all produce is: in a cluster
        once the ISR has it (NotReplicated, which the coordinator answers with
        COORDINATOR_NOT_AVAILABLE, as Kafka's TransactionStateManager)."""
        if self.transactions is None:
            return
        code = await self.transactions.log.replicated(partition)
        if code:
            raise NotReplicated(code, f"{TXN_TOPIC}-{partition}")
        if self.config["kafkalite.fsync.before.ack"]:
            await self.sync([self.transactions.log.topic().partitions[partition]])

    # --- topics ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict | None = None,
                     internal: bool = False) -> Topic:
        topic = self.logs.create_topic(name, partitions, configs, internal)
        self._attach(topic.partitions)
        return topic

    async def create_topic_async(self, name: str, partitions: int,
                                 configs: dict | None = None) -> Topic:
        """create_topic() without waiting for the disk on the loop (CreateTopics)."""
        topic = await self.logs.create_topic_async(name, partitions, configs)
        self._attach(topic.partitions)
        return topic

    async def add_partitions(self, name: str, total: int) -> None:
        self._attach(await self.logs.add_partitions_async(name, total))

    def _attach(self, partitions) -> None:
        for p in partitions:
            # Once only: a caller that shared the creation (ensure_topic) or a request
            # served before the creator resumed may have given it its state already.
            if p.producer_state is None:
                self.producers.attach(p)

    async def delete_topic(self, name: str) -> Topic:
        topic = await self.logs.delete_topic_async(name)
        for listener in list(self.topic_deleted_listeners):
            listener(name)
        return topic

    async def ensure_topic(self, name: str, partitions: int, configs: dict | None = None,
                           internal: bool = False) -> Topic:
        """`name`, created unless it exists; a creation under way is awaited, never done
        twice (LogManager.ensure_topic_async). The loop is not held meanwhile."""
        topic = await self.logs.ensure_topic_async(name, partitions, configs, internal)
        self._attach(topic.partitions)
        return topic

    async def auto_create(self, name: str) -> Any:
        """Create `name` with num.partitions if auto.create.topics.enable; else None. In a
        cluster the topic is written to ZooKeeper (cluster/auto_create.py) and the answer is
        the view's topic, or KafkaError: the creation's error, LEADER_NOT_AVAILABLE while the
        view has not seen the new topic yet (Kafka's answer to a topic it just created)."""
        creator = self.auto_creator
        if creator is not None:
            if name in INTERNAL_RF or name == SHARE_STATE_TOPIC:
                topic = await self.internal_topic(name)
            elif not self.config["auto.create.topics.enable"]:
                return None
            else:
                err = await creator.create(name, self.config["num.partitions"],
                                           self.config["default.replication.factor"])
                if err != ErrorCode.none:
                    raise KafkaError(err, None)
                topic = self.view.topic(name)
            if topic is None:
                raise KafkaError(ErrorCode.leader_not_available, None)
            return topic
        internal = await self.internal_topic(name)
        if internal is not None or not self.config["auto.create.topics.enable"]:
            return internal
        return await self.ensure_topic(name, self.config["num.partitions"])

    async def internal_topic(self, name: str) -> Topic | None:
        """__consumer_offsets, __transaction_state or __share_group_state, created with their
        own settings (compacted, offsets.topic.num.partitions, ...) as Kafka's
        AutoTopicCreationManager does, at their coordinator's first use; None for any other
        name."""
        groups, txns = self.groups, self.transactions
        store = (groups.store if name == OFFSETS_TOPIC and groups is not None else
                 txns.log if name == TXN_TOPIC and txns is not None else None)
        if name == SHARE_STATE_TOPIC and self.share_groups is not None:
            store = self.share_groups.store.log  # KIP-932's, created as Kafka 4.x does
        if store is None:
            return None
        if self.auto_creator is not None:  # a cluster: written to ZooKeeper, led elsewhere
            if name not in INTERNAL_RF:
                return None
            spec_name, partitions, configs = store.topic_spec()
            await self.auto_creator.create(spec_name, partitions,
                                           self.config[INTERNAL_RF[name]], configs)
            return self.view.topic(name)  # None until the view has seen it
        return await self.ensure_topic(*store.topic_spec(), internal=True)

    # --- dispatch -------------------------------------------------------------------------

    async def dispatch(self, frame: bytes, peer: str = "", listener: Any = None,
                       principal: str = "User:ANONYMOUS") -> list | None:
        """Answer one request frame (without its length prefix). Returns the response as a
        list of buffers (header first), or None when no response is due (acks=0)."""
        api_key, version, corr, client_id, pos = parse_fixed(frame)
        handler = HANDLERS.get(api_key)
        if handler is None or (handler.zk_only and not self.config["zookeeper.connect"]):
            raise MalformedRequest(refusal(api_key))
        if not handler.min_version <= version <= handler.max_version:
            if api_key == API_VERSIONS_KEY:
                from .handlers.api_versions import unsupported_version_body
                return [response_header(corr, False), unsupported_version_body()]
            raise MalformedRequest(
                f"unsupported version {version} of {handler.name} "
                f"(supported {handler.min_version}-{handler.max_version})")
        if version < handler.decodable_from:
            assert handler.legacy is not None
            return [response_header(corr, False), handler.legacy(frame, pos, version)]
        if handler.raw:  # no kio schema: the handler decodes and encodes the body
            ctx = RequestContext(self, api_key, version, corr, client_id, peer, listener,
                                 principal)
            return [response_header(corr, False), await handler.fn(ctx, (frame, pos))]
        flexible = is_flexible(api_key, version)
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        request = decode_request(api_key, version, frame, pos)
        ctx = RequestContext(self, api_key, version, corr, client_id, peer, listener,
                             principal)
        started = time.perf_counter()
        cpu = time.thread_time_ns()
        result = await handler.fn(ctx, request)
        self.stats.request_done(api_key, version, time.perf_counter() - started)
        throttle = max(ctx.throttle_ms,
                       self.quotas.request_time(client_id, time.thread_time_ns() - cpu))
        if throttle:
            self.quotas.mute(peer, throttle)
        if result is None:
            return None
        head = response_header(corr, flexible and api_key != API_VERSIONS_KEY)
        if isinstance(result, list):
            return [head, *result]
        if throttle and has_field(type(result), "throttle_time"):
            result = replace(result, throttle_time=ms(throttle))
        return [head, encode(result)]


def topic_error(name: str) -> KafkaError:
    return KafkaError(ErrorCode.unknown_topic_or_partition,
                      f"This server does not host this topic-partition: {name}")
