# One client connection of the Kafka listener (server.py): frame, queue, dispatch, write,
# and the flow control that bounds what a client can make the broker hold.
#
# One asyncio.Protocol per connection (uvicorn's model). Frames are 4-byte big-endian
# length-prefixed. Requests on a connection are answered one at a time, in order, as Kafka
# does (it mutes a channel until its response is sent); clients pipeline several, which
# queue here. A malformed frame closes only its own connection, with one log line.
#
# Memory is bounded both ways. Out: when the transport's write buffer passes its high-water
# mark (the client is not reading), the worker stops taking requests and the connection is
# not read either. In: reading pauses, at a frame boundary, while the connection holds
# READ_HIGH_WATER bytes or MAX_QUEUED_REQUESTS frames of requests, or while all connections
# together hold `queued.max.request.bytes` (RequestPool, Kafka's memory pool), and resumes
# as requests are answered, pool waiters first come first served. A request counts from the
# moment its 4-byte size is read, as Kafka allocates its buffer from the pool then: either
# bound is passed by one request at most. What a paused connection had already received
# (one socket read) waits unframed.
#
# Idleness, for connections.max.idle.ms: no byte read or written between two sweeps of the
# server; like Kafka's Selector, a request still being answered (a long-poll fetch) is no
# activity.
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from .security.tls import ANONYMOUS, peer_principal
from .security.sasl import CURRENT as SASL_SESSION, session_for
from .wire.errors import MalformedRequest

if TYPE_CHECKING:
    from .security.listeners import Listener
    from .security.sasl import SaslSession
    from .server import KafkaServer

log = logging.getLogger("kafkalite.server")

MAX_QUEUED_REQUESTS = 16
READ_HIGH_WATER = 4 * 1024 * 1024
WRITE_HIGH_WATER = 4 * 1024 * 1024


class KafkaConnection(asyncio.Protocol):
    sasl: "SaslSession | None" = None  # set by _sasl_start on a SASL listener

    def __init__(self, server: "KafkaServer", listener: "Listener | None" = None):
        self.server = server
        # The listener accepted on (name, security protocol, TLS context) and the client's
        # principal: its certificate's on an SSL listener, set by SASL on SASL ones.
        self.listener = listener
        self.principal = ANONYMOUS
        self.broker = server.broker
        self.max_request = server.max_request
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip: str | None = None
        self.pending: list[bytes] = []  # the start of a frame that is still arriving
        self.pending_len = 0
        self.need = 4  # > 4: the pending frame's size is known and charged
        self.stash: bytes | memoryview | None = None  # received while paused, unframed
        self.queue: deque[memoryview] = deque()
        self.held = 0  # bytes charged: queued frames, the one being answered, the pending one
        self.serving = 0  # bytes of the frame being answered
        self.wakeup: asyncio.Future | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.reading_paused = False
        self.muted = False  # a quota throttle is being served (mute_for)
        self.busy = False
        self.closed = False
        self.task: asyncio.Task | None = None
        self.active = True  # bytes moved since the last idle sweep
        self.active_ms = 0
        self.buffered_seen = 0

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
        if self.listener is not None and self.listener.uses_tls:
            self.principal = peer_principal(transport)  # the handshake is done by now
        self.active_ms = self.server.clock.monotonic_ms()
        self._sasl_start()
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.task = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        """Split the stream into frames without copying them: each queued frame is a
        read-only memoryview over the received bytes (kio reads those directly). Only a
        frame split across reads is joined, once, when its last byte arrives."""
        if self.closed:
            return
        self.active = True
        if not self.pending:
            self._frame(data, 0)
            return
        self.pending.append(data)
        self.pending_len += len(data)
        if self.pending_len < self.need:
            return
        data = b"".join(self.pending)
        self.pending = []
        self.pending_len = 0
        pos = 0
        if self.need > 4:  # the frame whose size came first, charged then
            self.queue.append(memoryview(data)[4:self.need])
            pos, self.need = self.need, 4
            self._wake()
        self._frame(data, pos)

    def _frame(self, data: bytes | memoryview, pos: int) -> None:
        n = len(data)
        view = memoryview(data)
        queued = len(self.queue)
        while n - pos >= 4:
            if self._over_bound(MAX_QUEUED_REQUESTS) or self.server.pool.exhausted:
                self.stash = _own(data, view, pos)
                self._pause()
                break
            size = int.from_bytes(view[pos:pos + 4], "big", signed=True)
            if size < 0 or size > self.max_request:
                self.abort(f"frame size {size} is outside 0..{self.max_request} "
                           "(socket.request.max.bytes)")
                return
            self._charge(4 + size)
            end = pos + 4 + size
            if end > n:
                self.need = 4 + size
                break
            self.queue.append(view[pos + 4:end])
            pos = end
        if self.stash is None and pos < n:
            rest = _own(data, view, pos)
            self.pending = [rest]
            self.pending_len = len(rest)
        if len(self.queue) > queued:
            self._wake()

    def _wake(self) -> None:
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)

    def pause_writing(self) -> None:
        # A client that does not read its answers is not read either: what it pipelines
        # meanwhile stays in its socket, not in the broker's queue.
        self.writable.clear()
        if not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        self.active = True
        self.writable.set()
        self.maybe_resume()

    def connection_lost(self, exc) -> None:
        self._drop_held()
        self.closed = True
        self.writable.set()
        if self.task is not None and not self.busy:
            self.task.cancel()
        else:
            self._wake()
        self.server.forget(self)

    # --- read flow control ----------------------------------------------------------------

    def _over_bound(self, max_frames: int) -> bool:
        return len(self.queue) >= max_frames or self.held >= READ_HIGH_WATER

    def _charge(self, n: int) -> None:
        self.held += n
        self.server.pool.take(n)

    def _pause(self) -> None:
        if not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        if self.server.pool.exhausted:
            self.server.pool.wait(self)

    def maybe_resume(self) -> None:
        """Read again once this connection and the pool are below their bounds; first
        frame what was received before the pause (which may pause it again)."""
        if not self.reading_paused or self.closed or self.server.stopping or self.muted \
                or not self.writable.is_set() or self._over_bound(MAX_QUEUED_REQUESTS // 2):
            return
        if self.server.pool.exhausted:
            self.server.pool.wait(self)
            return
        stash, self.stash = self.stash, None
        if stash is not None:
            self._frame(stash, 0)
            if self.stash is not None or self.closed:
                return
        self.reading_paused = False
        self.transport.resume_reading()  # type: ignore[union-attr]

    def _drop_held(self) -> None:
        """Give back to the pool what this connection holds, except the frame being
        answered (its worker gives that back when done)."""
        self.server.pool.forget(self)
        dropped = self.held - self.serving
        self.held = self.serving
        self.queue.clear()
        self.pending = []
        self.pending_len = 0
        self.need = 4
        self.stash = None
        self.server.pool.give(dropped)

    # --- request loop ---------------------------------------------------------------------

    def abort(self, reason: str | None = None, graceful: bool = False) -> None:
        """Close: at once, as Kafka closes a channel, unless `graceful` (shutdown), which
        first sends the answers already written."""
        if self.closed:
            return
        if reason:
            log.warning("Closing connection from %s: %s", self.peer, reason)
        self._drop_held()
        self.closed = True
        t = self.transport
        if t is not None:
            t.close() if graceful or not t.get_write_buffer_size() else t.abort()

    def expire_if_idle(self, now_ms: int, idle_ms: int) -> None:
        buffered = self.transport.get_write_buffer_size()  # type: ignore[union-attr]
        if self.active or buffered != self.buffered_seen:
            self.active = False
            self.buffered_seen = buffered
            self.active_ms = now_ms
        elif now_ms - self.active_ms > idle_ms:
            log.debug("Closing connection from %s: idle for more than %d ms "
                      "(connections.max.idle.ms)", self.peer, idle_ms)
            self.abort()

    @property
    def idle(self) -> bool:
        return not self.busy and not self.queue

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        transport = self.transport
        assert transport is not None
        while not self.closed:
            if not self.queue:
                self.server.connection_idle()
                self.wakeup = loop.create_future()
                await self.wakeup
                self.wakeup = None
                continue
            frame = self.queue.popleft()
            self.busy = True
            self.serving = 4 + len(frame)
            try:
                response = await (self.broker.dispatch(frame, self.peer, self.listener,
                                                       self.principal)
                                  if self.sasl is None else self._sasl_answer(frame))
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
                self.held -= self.serving
                self.server.pool.give(self.serving)
                self.serving = 0
                self.maybe_resume()
            if self.sasl is not None and self.sasl.failed:
                self._sasl_close(response)
                return
            if response is not None and not self.closed:
                size = sum(len(b) for b in response)
                transport.writelines([size.to_bytes(4, "big"), *response])
                self.active = True
                if not self.writable.is_set():
                    await self.writable.wait()
            throttle_ms = self.broker.quotas.take_mute(self.peer)
            if throttle_ms and not self.closed:
                await self.mute_for(throttle_ms)

    # --- SASL (security/sasl.py holds the state machine) -------------------------------

    def _sasl_start(self) -> None:
        """A SASL session when this connection's listener is SASL_PLAINTEXT or SASL_SSL
        (`listener` set by the server; without one, the configured first listener)."""
        self.sasl = session_for(self.broker, getattr(self, "listener", None))

    async def _sasl_answer(self, frame: memoryview) -> list | None:
        sasl = self.sasl
        assert sasl is not None
        if sasl.raw_tokens:  # after SaslHandshake v0: a bare SASL token, answered bare
            token = sasl.raw_token(bytes(frame))
            self._sasl_principal()
            return None if token is None else [token]
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if sasl.before_request(api_key) is not None:
            return None
        SASL_SESSION.set(sasl)
        response = await self.broker.dispatch(frame, self.peer, self.listener, self.principal)
        if api_key == 18:
            sasl.after_api_versions()
        self._sasl_principal()
        return response

    def _sasl_principal(self) -> None:
        if self.sasl is not None and self.sasl.principal is not None:
            self.principal = self.sasl.principal

    def _sasl_close(self, response: list | None) -> None:
        """Kafka's failed-authentication delay (a brake on password guessing): read nothing
        more; after connection.failed.authentication.delay.ms send the failure answer, if
        any, and close."""
        assert self.sasl is not None
        self._drop_held()
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self.broker.clock.call_later(self.sasl.settings.failed_delay_ms, self._sasl_closed,
                                     response, f"SASL: {self.sasl.close_reason}")

    def _sasl_closed(self, response: list | None, reason: str) -> None:
        if response is not None and not self.closed and self.transport is not None:
            self.transport.writelines([sum(len(b) for b in response).to_bytes(4, "big"),
                                       *response])
        self.abort(reason, graceful=True)

    async def mute_for(self, ms: int) -> None:
        """A quota throttle, as Kafka does it (KIP-219): the response has gone out with
        throttle_time_ms; now this connection is muted, nothing read and no queued request
        answered, for that long, on the broker's clock."""
        self.muted = True
        if not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        done = asyncio.get_running_loop().create_future()
        timer = self.broker.clock.call_later(ms, lambda: done.done() or done.set_result(None))
        try:
            await done
        finally:
            timer.cancel()
            self.muted = False
            self.maybe_resume()


class RequestPool:
    """Kafka's queued.max.request.bytes: the bytes of received requests not yet answered,
    across all connections. Connections that found it exhausted wait in arrival order."""

    def __init__(self, capacity: int):
        self.capacity = capacity if capacity > 0 else 0  # 0: unbounded
        self.used = 0
        self.waiters: dict[KafkaConnection, None] = {}
        self._waking = False

    @property
    def exhausted(self) -> bool:
        return 0 < self.capacity <= self.used

    def take(self, n: int) -> None:
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n
        if self._waking or not self.waiters:
            return
        self._waking = True  # a woken connection may give bytes back: no nested wake-ups
        try:
            while self.waiters and not self.exhausted:
                conn = next(iter(self.waiters))
                del self.waiters[conn]
                conn.maybe_resume()
        finally:
            self._waking = False

    def wait(self, conn: KafkaConnection) -> None:
        self.waiters[conn] = None

    def forget(self, conn: KafkaConnection) -> None:
        self.waiters.pop(conn, None)


def _own(data: bytes | memoryview, view: memoryview, pos: int) -> bytes | memoryview:
    """The bytes from `pos` on, in a buffer of their own: a view would keep the whole
    buffer alive, a joined request of up to socket.request.max.bytes, uncounted."""
    return data if pos == 0 else bytes(view[pos:])
