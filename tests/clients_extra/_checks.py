# Running a client check program (node/java) that exits non-zero listing every mismatch and
# prints a success marker last; its own watchdog (CHECK_TIMEOUT_MS) ends before ours.
from __future__ import annotations

import os
import subprocess

import pytest

TIMEOUT_S = 180


def run_check(cmd: list[str], marker: str, what: str, cwd: str | None = None,
              env: dict[str, str] | None = None) -> None:
    full_env = {**os.environ, "CHECK_TIMEOUT_MS": str((TIMEOUT_S - 20) * 1000), **(env or {})}
    try:
        done = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{what} did not finish in {TIMEOUT_S} s:\n{e.stdout}\n{e.stderr}")
    assert done.returncode == 0, (
        f"{what} failed (exit {done.returncode}):\n--- stdout\n{done.stdout[-6000:]}"
        f"\n--- stderr\n{done.stderr[-6000:]}")
    assert marker in done.stdout
