# Incremental fetch sessions (KIP-227), as the Java client uses them.
#
# (session_id, epoch): (0, -1) sessionless full fetch; (0, 0) full fetch opening a session;
# (id, -1) close id, sessionless; (id, 0) close id and open a new one; (id, n>0) incremental:
# the request carries only changed partitions (plus forgotten ones), the response only
# partitions with data, an error, or a changed high watermark / log start offset.
# An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH.
from __future__ import annotations

import itertools
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..wire.errors import ErrorCode, KafkaError

MAX_SESSIONS = 1000
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
    last_used: float = field(default_factory=time.monotonic)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS):
        self.sessions: "OrderedDict[int, FetchSession]" = OrderedDict()
        self.max_sessions = max_sessions
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def new(self) -> FetchSession:
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)  # evict the least recently used
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        s = FetchSession(sid, 1)
        self.sessions[sid] = s
        return s

    def get(self, session_id: int, epoch: int) -> FetchSession:
        s = self.sessions.get(session_id)
        if s is None:
            raise KafkaError(ErrorCode.fetch_session_id_not_found,
                             f"fetch session {session_id} not found")
        if s.epoch != epoch:
            raise KafkaError(ErrorCode.invalid_fetch_session_epoch,
                             f"fetch session {session_id} expected epoch {s.epoch}, got {epoch}")
        self.sessions.move_to_end(session_id)
        s.last_used = time.monotonic()
        return s

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def forget_topic(self, key_prefix) -> None:
        for s in self.sessions.values():
            for k in [k for k in s.partitions if k[0] == key_prefix]:
                del s.partitions[k]
