# The only module that touches sockets: accept, frame, dispatch, write, shut down.
#
# One asyncio.Protocol per connection (uvicorn's model). Frames are 4-byte big-endian
# length-prefixed. Requests on a connection are answered one at a time, in order, as Kafka
# does (it mutes a channel until its response is sent); clients pipeline several, which
# queue here. Flow control: when the transport's write buffer passes its high-water mark
# (the client is not reading), the worker stops taking requests; when too many requests are
# queued, reading pauses. So a client that never reads cannot make the broker buffer without
# bound. A malformed frame closes only its own connection, with one log line.
from __future__ import annotations

import asyncio
import logging
import resource
import signal
import time
from collections import deque

from .broker.broker import Broker
from .config import BrokerConfig
from .wire.errors import MalformedRequest

log = logging.getLogger("kafkalite.server")

MAX_QUEUED_REQUESTS = 16
WRITE_HIGH_WATER = 4 * 1024 * 1024
SHUTDOWN_GRACE_S = 10.0


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: "KafkaServer"):
        self.server = server
        self.broker = server.broker
        self.max_request = server.config["socket.request.max.bytes"]
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.pending: list[bytes] = []  # the start of a frame that is still arriving
        self.pending_len = 0
        self.need = 4
        self.queue: deque[memoryview] = deque()
        self.wakeup: asyncio.Future | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.reading_paused = False
        self.busy = False
        self.closed = False
        self.task: asyncio.Task | None = None

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        refusal = self.server.admit(self, peer[0] if peer else "?")
        if refusal:
            log.warning("Refusing connection from %s: %s", self.peer, refusal)
            self.closed = True
            transport.close()
            return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.task = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        """Split the stream into frames without copying them: each queued frame is a
        read-only memoryview over the received bytes (kio reads those directly). Only a
        frame split across reads is joined, once, when its last byte arrives."""
        if self.closed:
            return
        if self.pending:
            self.pending.append(data)
            self.pending_len += len(data)
            if self.pending_len < self.need:
                return
            data = b"".join(self.pending)
            self.pending = []
            self.pending_len = 0
        n = len(data)
        pos = 0
        view = memoryview(data)
        need = 4
        while n - pos >= 4:
            size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            if size < 0 or size > self.max_request:
                self.abort(f"frame size {size} is outside 0..{self.max_request} "
                           "(socket.request.max.bytes)")
                return
            end = pos + 4 + size
            if end > n:
                need = 4 + size
                break
            self.queue.append(view[pos + 4:end])
            pos = end
        if pos < n:
            rest = data[pos:] if pos else data
            self.pending = [rest]
            self.pending_len = len(rest)
            self.need = need
        if self.queue:
            if self.wakeup is not None and not self.wakeup.done():
                self.wakeup.set_result(None)
            if len(self.queue) >= MAX_QUEUED_REQUESTS and not self.reading_paused:
                self.reading_paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.writable.set()
        if self.task is not None and not self.busy:
            self.task.cancel()
        elif self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)
        self.server.forget(self)

    # --- request loop ---------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        log.warning("Closing connection from %s: %s", self.peer, reason)
        self.closed = True
        self.queue.clear()
        if self.transport is not None:
            self.transport.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        transport = self.transport
        assert transport is not None
        while not self.closed:
            if not self.queue:
                self.wakeup = loop.create_future()
                await self.wakeup
                self.wakeup = None
                continue
            frame = self.queue.popleft()
            if self.reading_paused and len(self.queue) < MAX_QUEUED_REQUESTS // 2:
                self.reading_paused = False
                transport.resume_reading()
            self.busy = True
            try:
                response = await self.broker.dispatch(frame, self.peer)
            except MalformedRequest as e:
                self.abort(str(e))
                return
            except Exception:
                log.exception("Unexpected error handling a request from %s; closing it",
                              self.peer)
                self.abort("internal error")
                return
            finally:
                self.busy = False
            if response is not None and not self.closed:
                size = sum(len(b) for b in response)
                transport.writelines([size.to_bytes(4, "big"), *response])
                if not self.writable.is_set():
                    await self.writable.wait()
            throttle_ms = self.broker.quotas.take_mute(self.peer)
            if throttle_ms and not self.closed:
                await self.mute_for(throttle_ms)

    async def mute_for(self, ms: int) -> None:
        """A quota throttle, as Kafka does it (KIP-219): the response has gone out with
        throttle_time_ms; now this connection is muted, nothing read and no queued request
        answered, for that long, on the broker's clock."""
        transport = self.transport
        assert transport is not None
        paused_here = not self.reading_paused
        if paused_here:
            transport.pause_reading()
        done = asyncio.get_running_loop().create_future()
        timer = self.broker.clock.call_later(
            ms, lambda: done.done() or done.set_result(None))
        try:
            await done
        finally:
            timer.cancel()
            if paused_here and not self.reading_paused and not self.closed:
                transport.resume_reading()

    @property
    def idle(self) -> bool:
        return not self.busy and not self.queue


class KafkaServer:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.broker = Broker(config)
        self.connections: set[KafkaConnection] = set()
        self.per_ip: dict[str, int] = {}
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopping = asyncio.Event()
        self.bound_port = 0
        self._metrics: asyncio.base_events.Server | None = None
        self.metrics_port = -1

    def admit(self, conn: KafkaConnection, ip: str) -> str | None:
        if len(self.connections) >= self.config["max.connections"]:
            return f"max.connections ({self.config['max.connections']}) reached"
        if self.per_ip.get(ip, 0) >= self.config["max.connections.per.ip"]:
            return f"max.connections.per.ip ({self.config['max.connections.per.ip']}) reached"
        self.connections.add(conn)
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        stats = self.broker.stats
        stats.connections = len(self.connections)
        stats.connections_total += 1
        conn.ip = ip  # type: ignore[attr-defined]
        return None

    def forget(self, conn: KafkaConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            ip = getattr(conn, "ip", None)
            if ip is not None:
                self.per_ip[ip] -= 1
                if not self.per_ip[ip]:
                    del self.per_ip[ip]
            self.broker.stats.connections = len(self.connections)

    async def start(self) -> None:
        _raise_fd_limit()
        t0 = time.monotonic()
        self.broker.open()
        host, port = self.config.listener()
        loop = asyncio.get_running_loop()
        metrics_port = self.config["kafkalite.metrics.port"]
        if metrics_port >= 0:
            self._metrics = await asyncio.start_server(self._serve_metrics, host or None,
                                                       metrics_port, reuse_address=True)
            self.metrics_port = self._metrics.sockets[0].getsockname()[1]
            log.info("Prometheus metrics on http://%s:%d/metrics", host or "0.0.0.0",
                     self.metrics_port)
        self._server = await loop.create_server(
            lambda: KafkaConnection(self), host or None, port, reuse_address=True,
            backlog=1024)
        self.bound_port = self._server.sockets[0].getsockname()[1]
        if self.broker.port == 0:
            self.broker.port = self.bound_port
        self._tasks.append(loop.create_task(self._housekeeping()))
        log.info("kafkalite listening on %s:%d (advertised %s:%d, node %d, data %s) in %.3fs",
                 host, self.bound_port, self.broker.host, self.broker.port,
                 self.broker.node_id, self.broker.logs.data_dir, time.monotonic() - t0)

    async def _housekeeping(self) -> None:
        """Retention checks and time-based flushes."""
        cfg = self.config
        retention_every = cfg["log.retention.check.interval.ms"] / 1000.0
        next_retention = time.monotonic() + retention_every
        while True:
            await asyncio.sleep(min(1.0, retention_every))
            now_ms = int(time.time() * 1000)
            try:
                self.broker.logs.flush_by_time(now_ms)
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + retention_every
                    self.broker.logs.apply_retention(now_ms)
                if self.broker.groups is not None:
                    self.broker.groups.tick(now_ms)
                self.broker.expire_producers(now_ms)
            except Exception:
                log.exception("Housekeeping failed; will retry")

    async def _serve_metrics(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        """A minimal HTTP/1.1 responder for GET /metrics (Prometheus text format)."""
        from .metrics import CONTENT_TYPE, render
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) >= 2 and parts[0] == b"GET" \
                    and parts[1].split(b"?")[0] in (b"/metrics", b"/"):
                status, ctype, body = b"200 OK", CONTENT_TYPE, render(self.broker)
            else:
                status, ctype, body = b"404 Not Found", b"text/plain", b"not found\n"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype
                         + b"\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        finally:
            writer.close()

    def request_stop(self) -> None:
        self._stopping.set()

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.request_stop)
            except (NotImplementedError, RuntimeError):
                pass
        await self.start()
        await self._stopping.wait()
        await self.stop()

    async def stop(self) -> None:
        """Stop accepting, answer what is in flight, flush and close the logs, write the
        clean-shutdown marker."""
        log.info("Shutting down")
        if self._server is not None:
            self._server.close()
        if self._metrics is not None:
            self._metrics.close()
        self.broker.closing = True
        self.broker.notifier.wake_all()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while time.monotonic() < deadline and not all(c.idle for c in self.connections):
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.closed = True
            if conn.transport is not None:
                conn.transport.close()
        for t in self._tasks:
            t.cancel()
        await asyncio.sleep(0)
        self.broker.close(clean=True)
        log.info("Shutdown complete")


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
