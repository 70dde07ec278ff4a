# Incremental fetch sessions (KIP-227), as the Java client uses them.
#
# (session_id, epoch): (0, -1) sessionless full fetch; (0, 0) full fetch opening a session;
# (id, -1) close id, sessionless; (id, 0) close id and open a new one; (id, n>0) incremental:
# the request carries only changed partitions (plus forgotten ones), the response only
# partitions with data, an error, or a changed high watermark / log start offset.
# An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH.
#
# The cache is bounded as Kafka's FetchSessionCache bounds it, for one broker (no follower
# fetches, so no privileged sessions): at most `max.incremental.fetch.session.cache.slots`
# sessions. When full, a new session evicts the least recently used one if it has been idle
# for EVICTION_MS; otherwise the smallest session older than EVICTION_MS, if the new one
# has more partitions; otherwise no session is created and the fetch is answered
# sessionless (session id 0), so that a thousand busy consumers do not evict each other in
# turn. Beyond Kafka, which keeps an idle session until a new one needs its slot, Broker.tick
# drops sessions idle for EVICTION_MS: a consumer that vanished holds no memory.
from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from ..clock import Clock
from ..wire.errors import ErrorCode, KafkaError

MAX_SESSIONS = 1000
# Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not configurable).
EVICTION_MS = 120_000
INITIAL = 0
FINAL = -1


@dataclass
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    last_hw: int = -1
    last_start: int = -1


@dataclass
class FetchSession:
    id: int
    epoch: int  # the epoch the next incremental request must carry
    partitions: "OrderedDict[tuple, SessionPartition]" = field(default_factory=OrderedDict)
    created_ms: int = 0
    last_used_ms: int = 0


class FetchSessionCache:
    def __init__(self, clock: Clock, max_sessions: int = MAX_SESSIONS,
                 eviction_ms: int = EVICTION_MS):
        self.clock = clock
        # Least recently used first: get() moves a session to the end.
        self.sessions: "OrderedDict[int, FetchSession]" = OrderedDict()
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def new(self, size: int = 0) -> FetchSession:
        """A new session for a fetch of `size` partitions. When the cache has no room for
        it, the returned session has id 0 and is not kept: the caller answers with session
        id 0, which tells the client to go on with full fetches."""
        now = self.clock.monotonic_ms()
        if len(self.sessions) >= self.max_sessions and not self._evict_for(size, now):
            return FetchSession(0, 1, created_ms=now, last_used_ms=now)
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        s = FetchSession(sid, 1, created_ms=now, last_used_ms=now)
        self.sessions[sid] = s
        return s

    def _evict_for(self, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        lru = next(iter(self.sessions.values()))
        if now - lru.last_used_ms > self.eviction_ms:
            del self.sessions[lru.id]
            return True
        # Kafka orders evictable sessions by (size, id) and lets a new one take the first
        # slot only if the new key is not smaller; its id is 0, so size must be larger.
        victim = min((s for s in self.sessions.values()
                      if now - s.created_ms > self.eviction_ms),
                     key=lambda s: (len(s.partitions), s.id), default=None)
        if victim is None or size <= len(victim.partitions):
            return False
        del self.sessions[victim.id]
        return True

    def get(self, session_id: int, epoch: int) -> FetchSession:
        s = self.sessions.get(session_id)
        if s is None:
            raise KafkaError(ErrorCode.fetch_session_id_not_found,
                             f"fetch session {session_id} not found")
        if s.epoch != epoch:
            raise KafkaError(ErrorCode.invalid_fetch_session_epoch,
                             f"fetch session {session_id} expected epoch {s.epoch}, got {epoch}")
        self.sessions.move_to_end(session_id)
        s.last_used_ms = self.clock.monotonic_ms()
        return s

    def evict_idle(self, now_ms: int) -> int:
        """Drop every session unused for longer than eviction_ms; returns how many."""
        dropped = 0
        while self.sessions:
            lru = next(iter(self.sessions.values()))
            if now_ms - lru.last_used_ms <= self.eviction_ms:
                break
            del self.sessions[lru.id]
            dropped += 1
        return dropped

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def forget_topic(self, key_prefix) -> None:
        for s in self.sessions.values():
            for k in [k for k in s.partitions if k[0] == key_prefix]:
                del s.partitions[k]
