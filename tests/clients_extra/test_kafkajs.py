# kafkajs (Node.js) against kafkalite: runs kafkajs/check.js, which exercises admin calls,
# an idempotent gzip producer, a two-member consumer group and the offset admin calls, and
# exits non-zero listing every mismatch. kafkajs is installed into kafkajs/node_modules
# (git-ignored) from the pinned package-lock.json; the test skips when node/npm are missing
# or the npm registry cannot be reached.
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ._checks import TIMEOUT_S, run_check

HERE = Path(__file__).parent / "kafkajs"


def _npm_install() -> None:
    if (HERE / "node_modules" / "kafkajs" / "package.json").exists():
        return
    cmd = ["npm", "ci" if (HERE / "package-lock.json").exists() else "install",
           "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"`{' '.join(cmd)}` timed out after {TIMEOUT_S} s (no npm registry?)")
    if done.returncode != 0:
        pytest.skip(f"`{' '.join(cmd)}` failed (no network or npm registry?):\n"
                    + (done.stderr or done.stdout)[-2000:])


def test_kafkajs_end_to_end(kafka_broker: str) -> None:
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed; the kafkajs check needs Node.js and npm")
    _npm_install()
    run_check(["node", "check.js", kafka_broker], "ALL KAFKAJS CHECKS PASSED", "kafkajs check",
              cwd=str(HERE), env={"KAFKAJS_NO_PARTITIONER_WARNING": "1"})
