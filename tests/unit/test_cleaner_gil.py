# The cleaner threads run Python for long stretches; while they run, the event loop waits
# for the GIL after each of its system calls for up to the interpreter's switch interval
# (5 ms by default), which multiplied produce latency during cleaning
# (benchmarks/cleaner_load.py). Starting the cleaner lowers the interval, never raises it.
from __future__ import annotations

import sys

from kafkalite.log.cleaner import SWITCH_INTERVAL_S, CleanerSettings, LogCleaner


def _started(tmp_path, **kw) -> float:
    c = LogCleaner(str(tmp_path), lambda: [], CleanerSettings(backoff_ms=50, **kw))
    try:
        c.start()
        return sys.getswitchinterval()
    finally:
        c.stop()


def test_cleaner_start_bounds_the_switch_interval(tmp_path):
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        assert _started(tmp_path) <= SWITCH_INTERVAL_S * 1.01
        sys.setswitchinterval(0.005)
        assert _started(tmp_path, enable=False) == 0.005  # no threads, nothing changed
        sys.setswitchinterval(SWITCH_INTERVAL_S / 2)
        assert _started(tmp_path) <= SWITCH_INTERVAL_S / 2 * 1.01  # a lower one is kept
    finally:
        sys.setswitchinterval(before)
