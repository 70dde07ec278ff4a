# Summarise a cProfile dump (from --cprofile) or a py-spy "raw" profile (collapsed stacks: `frame;frame;... count` per line) as
# the share of samples per function: self (the function itself was running) and inclusive
# (it was anywhere on the stack). With --nonblocking py-spy samples only while the broker is
# running Python or in a native call it made, so idle time (waiting in epoll) appears under
# the event loop's select frames and can be dropped with --busy.
#
#   python -m benchmarks.profile_summary /tmp/broker.txt [--top 25] [--busy]
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

# Frames in which a single-threaded asyncio server sits when it has nothing to do.
IDLE = re.compile(r"(select \(selectors\.py|_run_once \(asyncio/base_events\.py:\d+\)$|"
                  r"run_forever \(uvloop|epoll_wait|\(idle\))")


def parse(path: str) -> list[tuple[list[str], int]]:
    stacks = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            try:
                n = int(count)
            except ValueError:
                continue
            stacks.append((stack.split(";"), n))
    return stacks


def _short(frame: str) -> str:
    # "handle (kafkalite/broker/handlers/produce.py:123)" -> keep the function and file only
    return re.sub(r":\d+\)$", ")", frame.strip())


def summarise(stacks, busy_only: bool, lines: bool = False) -> tuple[int, Counter, Counter]:
    total = 0
    own: Counter = Counter()
    incl: Counter = Counter()
    for frames, n in stacks:
        if busy_only and frames and IDLE.search(frames[-1]):
            continue
        total += n
        names = [f.strip() if lines else _short(f) for f in frames if f.strip()]
        if not names:
            continue
        own[names[-1]] += n
        for name in set(names):
            incl[name] += n
    return total, own, incl


def summarise_pstats(path: str, top: int) -> int:
    """cProfile output (benchmarks.cprofile_broker): functions by own CPU time, as a share
    of all profiled CPU time, with call counts and CPU per call."""
    import pstats
    st = pstats.Stats(path)
    rows = []
    total = 0.0
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in st.stats.items():
        total += tottime
        short = file.replace("\\", "/").split("/site-packages/")[-1].split("/kafkalite/")[-1]
        rows.append((tottime, cumtime, ncalls, f"{func} ({short}:{line})"))
    if total <= 0:
        print("no samples")
        return 1
    print(f"{total:.2f} s of profiled CPU time\n")
    print(f"{'self %':>7}{'cum %':>7}{'calls':>10}{'us/call':>9}  function")
    for tottime, cumtime, ncalls, name in sorted(rows, reverse=True)[:top]:
        print(f"{100 * tottime / total:7.1f}{100 * cumtime / total:7.1f}{ncalls:>10}"
              f"{1e6 * tottime / max(ncalls, 1):9.1f}  {name}")
    print(f"\n{'cum %':>7}{'calls':>10}  function (by cumulative time)")
    for tottime, cumtime, ncalls, name in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"{100 * cumtime / total:7.1f}{ncalls:>10}  {name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("profile", help="pstats file (--cprofile) or py-spy raw output "
                                    "(--profile)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--lines", action="store_true",
                    help="attribute to source lines, not just functions")
    ap.add_argument("--busy", action="store_true",
                    help="leave out samples where the loop was idle in select/epoll")
    args = ap.parse_args(argv)
    with open(args.profile, "rb") as f:
        head = f.read(64)
    if not head.isascii() or head.startswith(b"{"):  # marshal'd pstats, not collapsed text
        return summarise_pstats(args.profile, args.top)
    total, own, incl = summarise(parse(args.profile), args.busy, args.lines)
    if not total:
        print("no samples")
        return 1
    print(f"{total} samples{' (busy only)' if args.busy else ''}\n")
    print(f"{'self %':>7}  function (file)")
    for name, n in own.most_common(args.top):
        print(f"{100 * n / total:7.1f}  {name}")
    print(f"\n{'incl %':>7}  function (file)")
    for name, n in incl.most_common(args.top):
        print(f"{100 * n / total:7.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
