# Runs scripts/docker-smoke.sh: build the image from the repo's Dockerfile (docker, or
# Debian's buildah with a locally made base image), start the broker from it, round-trip
# records through a real client, restart on the same volume, stop it; then run the same image
# with a SASL_PLAINTEXT listener and a SCRAM user set by KAFKALITE_* variables only, where
# confluent-kafka produces and consumes with the right password and is refused with a wrong
# one (the image is built once for both). The script prints
# `SKIP: ...` and exits 0 when no builder is usable or installable; that becomes a pytest
# skip with its reason. The first run on a machine builds a Debian base with debootstrap
# (a few minutes); later runs reuse /var/tmp/kafkalite-docker-cache.
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "docker-smoke.sh"
BUDGET_S = 900


def _run_smoke() -> tuple[int, str]:
    # Its own process group, so a run over budget is stopped with everything it started
    # (the script's EXIT trap stops the broker and removes its containers on SIGTERM).
    env = {**os.environ, "KAFKALITE_SMOKE_PYTHON": sys.executable}
    proc = subprocess.Popen(["bash", str(SCRIPT)], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BUDGET_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        pytest.fail(f"docker-smoke.sh ran over {BUDGET_S}s:\n{out[-4000:]}")
    return proc.returncode, out


@pytest.mark.timeout(BUDGET_S + 60)
def test_image_builds_and_serves_clients() -> None:
    rc, out = _run_smoke()
    skips = [line for line in out.splitlines() if line.startswith("SKIP:")]
    if rc == 0 and skips:
        pytest.skip(skips[-1])
    assert rc == 0, f"docker-smoke.sh exited {rc}:\n{out[-6000:]}"
    assert "[docker-smoke] PASS:" in out, out[-6000:]
    assert "[docker-smoke] sasl alice: read back" in out, out[-6000:]
    assert "[docker-smoke] sasl: wrong password refused" in out, out[-6000:]
    print(next(line for line in out.splitlines() if "PASS:" in line))
