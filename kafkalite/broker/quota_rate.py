# Kafka's quota arithmetic (org.apache.kafka.common.metrics: SampledStat, Rate, Sensor's
# quota check, QuotaUtils.throttleTime), sans-I/O: every reading takes `now_ms` from the
# broker's injected clock, so tests step a FakeClock instead of sleeping.
#
# A rate is kept in `samples` windows of `window_ms` (quota.window.num=11,
# quota.window.size.seconds=1). A window is complete `window_ms` after it opened; windows
# older than samples * window_ms are reset. The rate divides the sum of the windows by the
# elapsed time since the oldest opened, but never by less than (samples - 1) windows: a new
# client is measured as if it had been quiet for ten seconds, so it may burst up to
# quota * 10 s before it is throttled, exactly as in Kafka.
from __future__ import annotations

import math
from dataclasses import dataclass

WINDOWS = 11
WINDOW_MS = 1000


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


class Rate:
    """Kafka's Rate over a SampledStat (a sum per window), in units per second."""

    __slots__ = ("samples", "window_ms", "_windows", "_current")

    def __init__(self, samples: int = WINDOWS, window_ms: int = WINDOW_MS):
        self.samples = samples
        self.window_ms = window_ms
        self._windows: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._windows:
            self._windows.append(_Sample(now_ms))
        sample = self._windows[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._windows):
                self._windows.append(_Sample(now_ms))
            else:
                self._windows[self._current] = _Sample(now_ms)
            sample = self._windows[self._current]
        sample.value += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._windows:
            if now_ms - s.start_ms >= expire:
                s.start_ms, s.value = now_ms, 0.0

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._windows), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        size = self.window_size_ms(now_ms)
        return sum(s.value for s in self._windows) / (size / 1000.0)


def record_and_throttle(rate: Rate, value: float, bound: float, now_ms: int) -> int:
    """Sensor.record with checkQuotas, then QuotaUtils.throttleTime: the value is recorded
    whatever happens; over the bound, the client is throttled for as long as it takes the
    measured rate to fall back to it, (rate - bound) / bound * window size."""
    rate.record(value, now_ms)
    measured = rate.measure(now_ms)
    if measured <= bound:
        return 0
    # Math.round: halves go up (Python's round() would go to even).
    return math.floor((measured - bound) / bound * rate.window_size_ms(now_ms) + 0.5)


def unrecord(rate: Rate, value: float, now_ms: int) -> None:
    """ClientQuotaManager.unrecordQuotaSensor: a throttled fetch is answered empty, so the
    bytes it would have sent are taken back."""
    rate.record(-value, now_ms)
