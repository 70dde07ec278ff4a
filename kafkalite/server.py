# The Kafka listeners: one server per configured listener (`listeners`, named, each with its
# security protocol; TLS ones wrap their sockets with the listener's SSLContext, built at
# start by security/tls.py), accept (max.connections, max.connections.per.ip), hand each
# connection to connection.py with its listener (framing, flow control), close idle ones,
# shut down. With connection.py and metrics_http.py (the Prometheus endpoint), the only
# modules that touch sockets.
#
# Timers run on the broker's injected clock: Broker.tick, the housekeeping policy, every
# broker.tick_interval_ms; a sweep that closes connections idle for longer than
# `connections.max.idle.ms` (-1: never), as Kafka's Selector does.
#
# Shutdown (SIGTERM/SIGINT): stop accepting and reading, answer the requests already
# received (SHUTDOWN_GRACE_MS at most), close the connections, flush and close the logs,
# write the clean-shutdown marker. A second signal meanwhile exits at once with status 1
# and no marker, so that the next start recovers (uvicorn's second Ctrl-C).
from __future__ import annotations

import asyncio
import functools
import logging
import os
import resource
import signal
import time
from typing import Any, Awaitable

from .broker.broker import Broker
from .clock import Clock
from .config import BrokerConfig, ConfigError
from .connection import KafkaConnection, RequestPool
from .security.listeners import Listener, parse_listeners
from .security.tls import server_context

log = logging.getLogger("kafkalite.server")

SHUTDOWN_GRACE_MS = 10_000


class KafkaServer:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None):
        self.config = config
        self.broker = Broker(config, clock)
        self.clock = self.broker.clock
        self.max_request = config["socket.request.max.bytes"]
        pool_bytes = config["queued.max.request.bytes"]
        if 0 < pool_bytes < self.max_request:
            raise ConfigError("queued.max.request.bytes must be larger or equal to "
                              "socket.request.max.bytes")
        self.pool = RequestPool(pool_bytes)
        self.idle_ms = config["connections.max.idle.ms"]
        self.listeners: list[Listener] = parse_listeners(config)
        self.inter_broker: Any = None  # how a cluster broker reaches the others (TLS, SASL)
        if config["zookeeper.connect"]:  # Kafka checks these before any keystore
            from .cluster.inter_broker import InterBroker  # refuses a bad inter-broker setup
            self.inter_broker = self.broker.inter_broker = InterBroker(config, self.listeners)
        for listener in self.listeners:
            if listener.uses_tls:  # a bad keystore stops the start here (TlsConfigError)
                listener.ssl_context = server_context(config, listener)
        self.connections: set[KafkaConnection] = set()
        self.per_ip: dict[str, int] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._timers: dict[str, Any] = {}
        self._stop_requested = asyncio.Event()
        self.stopping = False
        self._drained: asyncio.Future | None = None
        self._closed_clean = False
        self.bound_port = 0
        self._metrics: asyncio.AbstractServer | None = None
        self.metrics_port = -1
        self.membership: Any = None  # cluster.membership.Membership with zookeeper.connect
        self.cluster_view: Any = None  # cluster.zk_view.ZkClusterView with zookeeper.connect
        self.controller: Any = None  # cluster.controller.Controller, on every cluster broker
        self.local_topics: Any = None  # cluster.local_topics.LocalTopics
        self.config_changes: Any = None  # cluster.config_changes.ConfigChanges
        self.zk_acls: Any = None  # cluster.zk_acls.ZkAcls: the ACLs in ZooKeeper

    def admit(self, conn: KafkaConnection, ip: str) -> str | None:
        if self.stopping:
            return "shutting down"
        if len(self.connections) >= self.config["max.connections"]:
            return f"max.connections ({self.config['max.connections']}) reached"
        if self.per_ip.get(ip, 0) >= self.config["max.connections.per.ip"]:
            return f"max.connections.per.ip ({self.config['max.connections.per.ip']}) reached"
        self.connections.add(conn)
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        stats = self.broker.stats
        stats.connections = len(self.connections)
        stats.connections_total += 1
        conn.ip = ip
        return None

    def forget(self, conn: KafkaConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            if conn.ip is not None:
                self.per_ip[conn.ip] -= 1
                if not self.per_ip[conn.ip]:
                    del self.per_ip[conn.ip]
            self.broker.stats.connections = len(self.connections)
        self.connection_idle()

    def connection_idle(self) -> None:
        if self._drained is not None and not self._drained.done() \
                and all(c.idle for c in self.connections):
            self._drained.set_result(None)

    async def start(self) -> None:
        _raise_fd_limit()
        t0 = time.monotonic()
        if self.config["zookeeper.connect"]:  # before the data directory: its cluster id
            from .cluster.membership import join_cluster
            self.membership = await join_cluster(self.config, self.clock)
        self.broker.open()
        if self.membership is not None:  # producer ids from the cluster's blocks
            from .cluster.producer_ids import claim_block
            zk = self.membership.client
            self.broker.pids.use_blocks(
                functools.partial(claim_block, zk, self.broker.node_id),
                lambda: zk.connected)
        host = self.listeners[0].host
        loop = asyncio.get_running_loop()
        metrics_port = self.config["kafkalite.metrics.port"]
        if metrics_port >= 0:
            from .metrics_http import start_metrics_server
            self._metrics = await start_metrics_server(self.broker, host or None, metrics_port)
            self.metrics_port = self._metrics.sockets[0].getsockname()[1]
            log.info("Prometheus metrics on http://%s:%d/metrics", host or "0.0.0.0",
                     self.metrics_port)
        for listener in self.listeners:
            server = await loop.create_server(
                lambda listener=listener: KafkaConnection(self, listener),
                listener.host or None, listener.port, reuse_address=True, backlog=1024,
                ssl=listener.ssl_context, start_serving=False)
            self._servers.append(server)
            listener.port = server.sockets[0].getsockname()[1]
        first = self.listeners[0]
        self.bound_port = first.port
        # Requests with no listener (in-process callers) see the first listener's endpoint.
        self.broker.host = first.advertised_host
        self.broker.port = first.advertised_port or first.port
        if self.membership is not None:
            from .cluster.membership import register_listeners
            await register_listeners(self.membership, self.listeners)
            self.broker.membership = self.membership
            self.broker.cluster_members = self.membership.members  # live, updated in place
            from .cluster.zk_view import start_view  # brokers, controller, leaders from znodes
            self.cluster_view = await start_view(self.broker, self.membership, self.config)
            self.broker.view = self.cluster_view
            from .cluster.replication import Replication  # leaders, followers, ISR, HW
            self.broker.replication = Replication(self.broker, self.cluster_view, self.config)
            self.broker.replication.start()
            from .cluster.marker_sender import MarkerSender  # markers to other leaders
            self.broker.marker_sender = MarkerSender(self.broker, self.cluster_view, self.config)
            from .cluster.txn_verifier import TxnVerifier  # KIP-890 with other coordinators
            self.broker.txn_verifier = TxnVerifier(self.broker, self.cluster_view, self.config)
            from .cluster.config_changes import ConfigChanges  # topic configs from ZooKeeper
            self.config_changes = ConfigChanges(self.broker, self.membership.client, self.clock)
            self.broker.config_changes = self.config_changes
            await self.config_changes.start()
            from .cluster.zk_acls import start_zk_acls  # ACLs from ZooKeeper, as AclAuthorizer
            self.zk_acls = await start_zk_acls(self.broker, self.membership.client, self.clock)
            from .cluster.auto_create import AutoCreator  # topics created on first use
            from .cluster.coordinator_leadership import follow_leadership
            self.broker.auto_creator = AutoCreator(self.broker, self.cluster_view.client)
            follow_leadership(self.broker, self.cluster_view)  # coordinators on leaders
            if self.config["kafkalite.controller.enable"]:
                await self._start_controller()
        # Bound (the registration names the ports) but refusing connections until here, so
        # that no client is answered before the broker is a cluster member with its view, as
        # Kafka enables request processing only at the end of its start-up.
        for server in self._servers:
            await server.start_serving()
        self._timers["tick"] = self.clock.call_later(self.broker.tick_interval_ms, self._tick)
        if self.idle_ms >= 0:
            self._timers["idle"] = self.clock.call_later(self._sweep_every_ms, self._sweep_idle)
        log.info("kafkalite listening on %s (node %d, data %s) in %.3fs", ", ".join(
            f"{ln.name}{'' if ln.name == ln.protocol else ' ' + ln.protocol} {ln.host}:"
            f"{ln.port} (advertised {ln.advertised_host}:"
            f"{ln.advertised_port or ln.port})" for ln in self.listeners),
            self.broker.node_id, self.broker.logs.data_dir, time.monotonic() - t0)

    async def _start_controller(self) -> None:
        """Every cluster broker runs a controller (it acts while it holds /controller), fed
        by membership's live set: one watch of /brokers/ids serves both."""
        from .cluster.controller import Controller
        from .cluster.local_topics import LocalTopics
        client = self.membership.client
        self.controller = Controller(client, self.broker.node_id, live=self.membership,
                                     clock=self.clock,
                                     unclean=self.config["unclean.leader.election.enable"],
                                     auto_rebalance=self.config["auto.leader.rebalance.enable"],
                                     imbalance_interval_ms=1000 * self.config[
                                         "leader.imbalance.check.interval.seconds"],
                                     imbalance_percentage=self.config[
                                         "leader.imbalance.per.broker.percentage"])
        await self.controller.start()
        self.broker.controller = self.controller  # the admin handlers route through it
        self.local_topics = LocalTopics(self.broker, client)
        await self.local_topics.start()

    def _tick(self) -> None:
        self._timers["tick"] = self.clock.call_later(self.broker.tick_interval_ms, self._tick)
        self.broker.tick(self.clock.monotonic_ms())

    @property
    def _sweep_every_ms(self) -> int:
        # A connection is closed between 1x and 1x + 2 sweeps after its last byte, never
        # sooner: at most half the idle time late, at most 2 s with Kafka's default.
        return max(10, min(1000, self.idle_ms // 4))

    def _sweep_idle(self) -> None:
        self._timers["idle"] = self.clock.call_later(self._sweep_every_ms, self._sweep_idle)
        now = self.clock.monotonic_ms()
        for conn in list(self.connections):
            conn.expire_if_idle(now, self.idle_ms)

    def request_stop(self) -> None:
        self._stop_requested.set()

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal)
            except (NotImplementedError, RuntimeError):
                pass
        await self.start()
        await self._stop_requested.wait()
        await self.stop()

    def _on_signal(self) -> None:
        # The second signal gets a plain handler: Python runs it between any two bytecodes,
        # also inside a long synchronous step of the shutdown (flushing every partition),
        # where a handler queued on the event loop would wait for that step to end.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._force_exit)
        self.request_stop()

    def _force_exit(self, signum: int, _frame: Any) -> None:
        if self._closed_clean:
            os._exit(0)
        try:
            log.warning("%s during shutdown: exiting now, without a clean shutdown "
                        "(the next start recovers)", signal.Signals(signum).name)
        finally:
            os._exit(1)

    async def stop(self) -> None:
        """Stop accepting and reading, answer what is in flight, close the connections,
        flush and close the logs, write the clean-shutdown marker."""
        log.info("Shutting down")
        if self.membership is not None:  # leadership moves off while this broker still serves
            from .cluster.controlled_shutdown import controlled_shutdown
            await controlled_shutdown(self.config, self.membership, self.cluster_view,
                                      self.inter_broker)
        self.stopping = True
        for timer in self._timers.values():
            timer.cancel()
        for server in self._servers:
            server.close()
        if self._metrics is not None:
            self._metrics.close()
        for conn in self.connections:
            if not conn.reading_paused and conn.transport is not None:
                conn.reading_paused = True
                conn.transport.pause_reading()
        self.broker.closing = True
        self.broker.notifier.wake_all()
        self._drained = asyncio.get_running_loop().create_future()
        self.connection_idle()
        await self._within(self._drained, SHUTDOWN_GRACE_MS)
        for conn in list(self.connections):
            conn.abort(graceful=True)
        for server in self._servers:
            await self._within(server.wait_closed(), SHUTDOWN_GRACE_MS)
        # before the logs and sessions go
        for part in (self.broker.replication, self.local_topics, self.controller,
                     self.config_changes, self.zk_acls):
            if part is not None:
                await self._within(part.stop(), SHUTDOWN_GRACE_MS)
        self.broker.close(clean=True)
        if self.broker.marker_sender is not None:
            self.broker.marker_sender.close()
            self.broker.txn_verifier.close()
        if self.cluster_view is not None:
            await self._within(self.cluster_view.close(), SHUTDOWN_GRACE_MS)
        if self.membership is not None:  # the registration goes with the session
            await self._within(self.membership.close(), SHUTDOWN_GRACE_MS)
        self._closed_clean = True
        log.info("Shutdown complete")

    async def _within(self, aw: Awaitable[Any], timeout_ms: int) -> None:
        """Await `aw`, giving up after timeout_ms on the broker's clock."""
        task = asyncio.ensure_future(aw)
        timer = self.clock.call_later(timeout_ms, task.cancel)
        try:
            await asyncio.wait([task])
        finally:
            timer.cancel()
        if not task.cancelled() and task.exception() is not None:
            log.warning("Shutdown step failed: %r", task.exception())


def _raise_fd_limit() -> None:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


def install_event_loop() -> str:
    """uvloop when installed (faster for this workload), else stock asyncio."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def run(config: BrokerConfig) -> None:
    loop_name = install_event_loop()
    log.debug("event loop: %s", loop_name)
    asyncio.run(KafkaServer(config).serve_forever())
