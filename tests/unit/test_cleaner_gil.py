# The cleaner threads run Python for long stretches; while they run, the event loop waits
# for the GIL after each of its system calls for up to the interpreter's switch interval
# (5 ms by default), which multiplied produce latency during cleaning
# (benchmarks/cleaner_load.py). While a cleaning runs the interval is lowered (never
# raised), and the previous one comes back when no cleaning runs.
from __future__ import annotations

import sys
import threading

from kafkalite.log.cleaner import SWITCH_INTERVAL_S, ShortSwitchInterval


def test_the_interval_is_short_only_while_a_cleaning_runs():
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        short = ShortSwitchInterval()
        with short:
            assert sys.getswitchinterval() <= SWITCH_INTERVAL_S * 1.01
        assert sys.getswitchinterval() == 0.005
        sys.setswitchinterval(SWITCH_INTERVAL_S / 2)
        with short:  # a lower one is kept
            assert sys.getswitchinterval() <= SWITCH_INTERVAL_S / 2 * 1.01
        assert sys.getswitchinterval() <= SWITCH_INTERVAL_S / 2 * 1.01
    finally:
        sys.setswitchinterval(before)


def test_two_cleaner_threads_restore_it_when_the_last_leaves():
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        short = ShortSwitchInterval()
        first_in, second_out = threading.Event(), threading.Event()
        seen: list[float] = []

        def first() -> None:
            with short:
                first_in.set()
                second_out.wait(10)
                seen.append(sys.getswitchinterval())  # the other left: still short

        t = threading.Thread(target=first)
        t.start()
        assert first_in.wait(10)
        with short:
            pass
        second_out.set()
        t.join(10)
        assert seen and seen[0] <= SWITCH_INTERVAL_S * 1.01
        assert sys.getswitchinterval() == 0.005
    finally:
        sys.setswitchinterval(before)
