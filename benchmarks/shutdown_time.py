"""Time from SIGTERM to process exit of an idle `kafkalite serve` (a clean shutdown: stop
accepting, flush, write the marker). Issue 11 measured 1.1-1.8 s after "Shutdown complete".

    .venv/bin/python -m benchmarks.shutdown_time [--runs 10]

Each run starts a fresh broker on a free port with its own data directory, waits until it
answers, waits 0.5 s, sends SIGTERM and times the exit. Medians and maxima are printed.
"""
from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time

from kafkalite.testing import BrokerProcess


def once() -> float:
    with tempfile.TemporaryDirectory(prefix="kafkalite-shutdown-") as d:
        bp = BrokerProcess(data_dir=f"{d}/data").start()
        try:
            time.sleep(0.5)
            assert bp.proc is not None
            t0 = time.perf_counter()
            bp.proc.send_signal(signal.SIGTERM)
            bp.proc.wait(timeout=30)
            total = time.perf_counter() - t0
            log = bp.read_log()
        finally:
            bp.cleanup()
    if "Shutdown complete" not in log:
        raise RuntimeError("no clean shutdown:\n" + log[-2000:])
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.shutdown_time")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args(argv)
    runs = [once() for _ in range(max(1, min(args.runs, 100)))]
    print(f"SIGTERM to exit, idle broker, {len(runs)} runs: median "
          f"{statistics.median(runs) * 1000:.0f} ms, max {max(runs) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
