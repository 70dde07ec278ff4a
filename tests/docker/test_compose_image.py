# docker-compose.yml's brokers from the image itself, where no Docker engine runs: the image
# is built from the Dockerfile with the compose file's build args by buildah (the base image
# and layer cache of scripts/docker-smoke.sh, under its lock), then
#  - each broker's compose environment goes through the image's own configuration step
#    (kafkalite.config inside the image, kazoo importable) and gives the configuration the
#    host's checkout reads from it;
#  - the three brokers run from the image (`buildah run --isolation=chroot`, the host's
#    network) with their compose environment, ZooKeeper and listeners moved to what this
#    machine has (the session ZooKeeper of tests/helpers/zookeeper.py, free ports): every
#    broker's Metadata lists the three, and `kafkalite cluster status` shows their racks.
# Skips with the reason where buildah cannot run or the smoke test's base image is missing.
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kafkalite.config import load_config
from kafkalite.security.listeners import parse_listeners
from kafkalite.tools.health import probe
from tests.cli.conftest import run_cli
from tests.docker.test_compose import BROKERS, COMPOSE, REPO, broker_env, strict_load
from tests.helpers.real_kafka import eventually, free_port_pair
from tests.helpers.zookeeper import chroot_connect

pytestmark = pytest.mark.docker

CACHE = Path(os.environ.get("KAFKALITE_DOCKER_CACHE", "/var/tmp/kafkalite-docker-cache"))
IMAGE = "localhost/kafkalite:compose"
BASE_PREFIX = "localhost/kafkalite-smoke-base:"
IMAGE_UID = "10001"  # the Dockerfile's kafkalite user
BUILD_S, LOCK_S = 900, 900


def buildah(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["buildah", "--root", str(CACHE / "storage"), "--runroot", str(CACHE / "run"), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode:
        raise AssertionError(f"{' '.join(args[:2])} exited {p.returncode}: {p.stderr[-3000:]}")
    return p


def base_image() -> str | None:
    """The Debian base scripts/docker-smoke.sh made (no registry is reachable here)."""
    p = buildah("images", "--format", "{{.Name}}:{{.Tag}}", check=False)
    names = [n for n in p.stdout.split() if n.startswith(BASE_PREFIX)]
    return names[-1] if names else None


@pytest.fixture(scope="module")
def compose() -> dict:
    return strict_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def image(compose):
    if shutil.which("buildah") is None:
        pytest.skip("no buildah (scripts/docker-smoke.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("buildah's chroot isolation needs root here")
    base = base_image()
    if base is None:
        pytest.skip(f"no base image in {CACHE}: scripts/docker-smoke.sh "
                    "(tests/docker/test_docker_smoke.py) makes it")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:  # docker-smoke.sh's: one user of the cache
        deadline = time.monotonic() + LOCK_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{CACHE}/lock held for {LOCK_S}s")
                time.sleep(1)
        args = compose["services"][BROKERS[0]]["build"]["args"]
        build_args = [a for k, v in args.items() for a in ("--build-arg", f"{k}={v}")]
        buildah("bud", "--isolation=chroot", "--pull=never", "--format", "docker", "--layers",
                "--build-arg", f"BASE_IMAGE={base}", *build_args, "-t", IMAGE,
                "-f", str(REPO / "Dockerfile"), str(REPO), timeout=BUILD_S)
        yield IMAGE


def run_args(env: dict[str, str]) -> list[str]:
    return [a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")]


CONFIG_STEP = """
import json, kazoo
from kafkalite.config import load_config
from kafkalite.security.listeners import parse_listeners
c = load_config()
print(json.dumps({"node_id": c.node_id, "zookeeper.connect": c["zookeeper.connect"],
                  "log.dirs": c["log.dirs"], "rack": c["broker.rack"], "kazoo": kazoo.__version__,
                  "listeners": [[l.name, l.port, l.advertised_host, l.advertised_port]
                                for l in parse_listeners(c)]}))
"""


def expected_config(env: dict[str, str]) -> dict:
    c = load_config(None, (), environ=env)
    return {"node_id": c.node_id, "zookeeper.connect": c["zookeeper.connect"],
            "log.dirs": c["log.dirs"], "rack": c["broker.rack"], "kazoo": "2.11.0",
            "listeners": [[lst.name, lst.port, lst.advertised_host, lst.advertised_port]
                          for lst in parse_listeners(c)]}


def test_the_image_reads_each_broker_environment_as_the_checkout_does(image, compose):
    for name in BROKERS:
        service_env = compose["services"][name]["environment"]
        ctr = buildah("from", "--pull=never", image).stdout.strip()
        try:
            p = buildah("run", "--isolation=chroot", *run_args(service_env), ctr, "--",
                        "python3", "-c", CONFIG_STEP)
        finally:
            buildah("rm", ctr, check=False)
        seen = json.loads(p.stdout.strip().splitlines()[-1])
        assert seen == expected_config(broker_env(compose["services"][name])), name


def innermost(pid: int) -> int:
    """The broker under `buildah run` (which answers SIGTERM by killing it outright)."""
    for _ in range(6):
        kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                              text=True).stdout.split()
        if not kids:
            break
        pid = int(kids[0])
    return pid


def test_three_brokers_from_the_image_form_a_cluster(image, compose, zookeeper):
    connect = chroot_connect(zookeeper)
    procs: list[subprocess.Popen] = []
    containers: list[str] = []
    dirs: list[str] = []
    external: dict[int, str] = {}
    try:
        for i, name in enumerate(BROKERS, 1):
            inside, outside = free_port_pair(), free_port_pair()
            env = {**compose["services"][name]["environment"],
                   # what this machine has instead of the compose network and its ZooKeeper
                   "KAFKALITE_ZOOKEEPER_CONNECT": connect,
                   "KAFKALITE_LISTENERS":
                       f"PLAINTEXT://127.0.0.1:{inside},EXTERNAL://127.0.0.1:{outside}",
                   "KAFKALITE_ADVERTISED_LISTENERS":
                       f"PLAINTEXT://127.0.0.1:{inside},EXTERNAL://127.0.0.1:{outside}",
                   "KAFKALITE_METRICS_PORT": "-1"}
            external[i] = f"127.0.0.1:{outside}"
            data = tempfile.mkdtemp(prefix=f"compose-{name}-")
            dirs.append(data)
            os.chown(data, int(IMAGE_UID), int(IMAGE_UID))
            ctr = buildah("from", "--pull=never", image).stdout.strip()
            containers.append(ctr)
            log = open(os.path.join(data, "..", f"{os.path.basename(data)}.log"), "w")
            procs.append(subprocess.Popen(
                ["buildah", "--root", str(CACHE / "storage"), "--runroot", str(CACHE / "run"),
                 "run", "--isolation=chroot", *run_args(env), "-v",
                 f"{data}:/var/lib/kafkalite", ctr, "--", "kafkalite", "serve"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True))

        def brokers_seen(bootstrap: str) -> int:
            host, port = bootstrap.rsplit(":", 1)
            try:
                return probe(host, int(port), 3.0)["brokers"]
            except Exception:  # noqa: BLE001 - not up yet
                return 0
        for i, bootstrap in external.items():
            assert eventually(lambda: brokers_seen(bootstrap), lambda n: n == 3,
                              timeout=90, interval=0.5) == 3, f"broker{i}"
        r = run_cli("cluster", "status", "--bootstrap-server", external[1], "--json")
        assert r.code == 0, r.err
        report = r.json()
        assert [(b["id"], b["rack"]) for b in report["brokers"]] == [
            (1, "rack-1"), (2, "rack-2"), (3, "rack-3")]
        assert report["controller"] in (1, 2, 3)
    finally:
        for p in procs:  # a clean stop, as `docker compose stop`
            try:
                os.kill(innermost(p.pid), signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for ctr in containers:
            buildah("rm", ctr, check=False)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
            try:
                os.remove(f"{d}.log")
            except OSError:
                pass
