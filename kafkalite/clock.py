# The one clock every timer and deadline goes through, injected into each state machine.
#
# Two readings, never mixed: `monotonic_ms()` for deadlines and timers (session timeouts,
# idle connections, flush.ms, fetch waits), which a wall-clock step cannot move; `wall_ms()`
# only for what Kafka stores or shows as a time of day (record and commit timestamps,
# retention by record timestamp). `call_later` schedules on the monotonic reading.
# FakeClock runs the same timers by hand, so the state machines have unit tests that
# step time instead of sleeping (kfake's group timer tests are the model).
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Any, Callable, Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def monotonic_ms(self) -> int: ...

    def wall_ms(self) -> int: ...

    def call_later(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle: ...


class SystemClock:
    """The real clock: the running event loop's monotonic time and timers."""

    def monotonic_ms(self) -> int:
        return int(time.monotonic() * 1000)

    def wall_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn, *args)


class _FakeTimer:
    __slots__ = ("when", "fn", "args", "cancelled")

    def __init__(self, when: int, fn: Callable[..., Any], args: tuple):
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to. `advance(ms)` fires every timer that falls
    due, in deadline order (ties in scheduling order), with the clock set to each timer's
    deadline while it runs. The wall reading can be stepped on its own (`step_wall`), to
    show that no deadline depends on it."""

    def __init__(self, start_ms: int = 1_000_000, wall_start_ms: int = 1_700_000_000_000):
        self._now = start_ms
        self._wall_offset = wall_start_ms - start_ms
        self._timers: list[tuple[int, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def monotonic_ms(self) -> int:
        return self._now

    def wall_ms(self) -> int:
        return self._now + self._wall_offset

    def call_later(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> _FakeTimer:
        t = _FakeTimer(self._now + max(int(delay_ms), 0), fn, args)
        heapq.heappush(self._timers, (t.when, next(self._seq), t))
        return t

    def step_wall(self, delta_ms: int) -> None:
        self._wall_offset += delta_ms

    def pending(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def advance(self, delta_ms: int) -> None:
        target = self._now + delta_ms
        while self._timers and self._timers[0][0] <= target:
            when, _, t = heapq.heappop(self._timers)
            if t.cancelled:
                continue
            self._now = max(self._now, when)
            t.fn(*t.args)
        self._now = target
