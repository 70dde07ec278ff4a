# Run the kafkalite broker under cProfile with a CPU-time clock, writing pstats on exit.
#
#   python -m benchmarks.cprofile_broker OUT.prof serve --set ...   (what --cprofile spawns)
#
# Why CPU time: on a shared machine a wall-clock profiler charges the time the broker sat
# preempted to whatever line it was on (typically the socket send that woke a client).
# process_time counts only what the broker itself ran. cProfile slows Python code down
# (~1.5-2x), so use it for where-does-time-go, never for the throughput figures.
from __future__ import annotations

import cProfile
import sys
import time


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: python -m benchmarks.cprofile_broker OUT.prof serve [...]",
              file=sys.stderr)
        return 2
    out = sys.argv[1]
    from kafkalite.cli import main as kafkalite_main
    # Import what `serve` imports before profiling starts, so that start-up imports (a
    # large, one-off cost) do not crowd the steady-state picture.
    import kafkalite.broker.handlers  # noqa: F401
    import kafkalite.server  # noqa: F401
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    try:
        return kafkalite_main(sys.argv[2:])
    finally:
        prof.disable()
        prof.dump_stats(out)


if __name__ == "__main__":
    sys.exit(main())
