"""Wall time of `kafkalite` commands, start to exit, against a broker this script spawns.

    .venv/bin/python -m benchmarks.cli_startup [--runs 20] [--tree PATH ...]

Each command runs --runs times as a fresh `python -m kafkalite` process (bytecode cached
under a private prefix, as an installed package has it); the median wall time and the median
CPU time (user + system, which other load on a shared machine disturbs less) are printed.
--tree runs the commands from other checkouts (e.g. `git archive REV kafkalite` unpacked
somewhere) to compare revisions in one run, on one broker; runs of the trees alternate.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from kafkalite.testing import BrokerProcess

COMMANDS = [
    ("--version",),
    ("topics", "--help"),
    ("topics", "list", "{B}"),
    ("health", "{B}"),
    ("consume", "--topic", "bench", "--from-beginning", "--max-messages", "1", "{B}"),
    ("dump-log", "{SEGMENT}"),
]


def _once(cmd: list[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one run of cmd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    code = subprocess.run(cmd, env=env, capture_output=True, timeout=60,
                          cwd=tempfile.gettempdir()).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tree", action="append", default=[],
                        help="a directory holding a kafkalite package to time instead")
    args = parser.parse_args()
    trees = args.tree or [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    cache = tempfile.mkdtemp(prefix="kafkalite-pycache-")
    with BrokerProcess() as broker:
        base = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        cli = [sys.executable, "-m", "kafkalite"]
        bootstrap = ["--bootstrap-server", broker.bootstrap]
        subprocess.run(cli + ["produce", "--topic", "bench", "--value", "x", *bootstrap],
                       env={**base, "PYTHONPATH": trees[-1]}, cwd=tempfile.gettempdir(),
                       check=True, capture_output=True, timeout=60)
        segment = os.path.join(broker.data_dir, "bench-0", "00000000000000000000.log")
        floor = statistics.median(_once([sys.executable, "-c", "pass"], base)[0]
                                  for _ in range(args.runs))
        print(f"python -c pass: median {floor * 1000:.0f} ms")
        for command in COMMANDS:
            argv = []
            for a in command:
                argv += bootstrap if a == "{B}" else [segment] if a == "{SEGMENT}" else [a]
            envs = [{**base, "PYTHONPATH": tree} for tree in trees]
            for env in envs:
                _once(cli + argv, env)  # fills the bytecode cache
            runs: list[list[tuple[float, float, int]]] = [[] for _ in trees]
            for _ in range(args.runs):
                for i, env in enumerate(envs):
                    runs[i].append(_once(cli + argv, env))
            shown = " ".join("BOOTSTRAP" if a == "{B}" else "SEGMENT" if a == "{SEGMENT}"
                             else a for a in command)
            print(f"kafkalite {shown}")
            for tree, results in zip(trees, runs):
                wall = statistics.median(r[0] for r in results) * 1000
                cpu = statistics.median(r[1] for r in results) * 1000
                codes = {r[2] for r in results} - {0}
                print(f"  {tree}: wall {wall:.0f} ms, CPU {cpu:.0f} ms"
                      f"{f' (exit {codes})' if codes else ''}")
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
