# Apache Kafka 3.8.0 as the benchmark's reference target, started from the anchor's serve.sh
# (single-node KRaft on 127.0.0.1:PORT, controller on PORT+1).
#
# The anchor is looked for in $KAFKA_ANCHOR_DIR, then ../shared/anchors/kafka-3.8.0 beside the
# repository root, then /work/shared/anchors/kafka-3.8.0. serve.sh execs the JVM, so its pid is
# normally the broker's; the java process is still looked up among its descendants in case a
# wrapper stays in between, because CPU and RSS must be the JVM's, not a shell's.
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from .broker_proc import REPO, Startup, wait_until_serving

ANCHOR_ENV = "KAFKA_ANCHOR_DIR"
FALLBACK_ANCHOR = "/work/shared/anchors/kafka-3.8.0"

# Deleted topics leave the disk after 1 s instead of Kafka's 60 s, so that, as with kafkalite,
# a test does not run beside its predecessors' data. num.partitions only matters if a topic
# is ever auto-created; the harness creates them with CreateTopics.
REF_SETTINGS = {"num.partitions": "4", "file.delete.delay.ms": "1000"}


def anchor_dir() -> str | None:
    candidates = [os.environ.get(ANCHOR_ENV),
                  os.path.join(os.path.dirname(REPO), "shared", "anchors", "kafka-3.8.0"),
                  FALLBACK_ANCHOR]
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, "serve.sh")):
            return os.path.abspath(d)
    return None


def java_major() -> int | None:
    """The major version of the java that Kafka's scripts will run (JAVA_HOME first)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8" is Java 8


def unavailable_reason() -> str | None:
    """Why the reference cannot run here, or None when it can."""
    if anchor_dir() is None:
        return (f"Apache Kafka anchor not found (set {ANCHOR_ENV}, or provide "
                f"../shared/anchors/kafka-3.8.0 or {FALLBACK_ANCHOR})")
    major = java_major()
    if major is None:
        return "no java found (JAVA_HOME or PATH); Kafka 3.8 needs Java 17"
    if major < 17:
        return f"java {major} found; the anchor is run with Java 17 or later"
    return None


def free_port_pair(low: int = 20000, high: int = 32000, tries: int = 200) -> int:
    """A port P below 32768 such that P and P+1 (the controller's) are both free now."""
    import random
    for _ in range(tries):
        port = random.randrange(low, high)
        socks = []
        try:
            for p in (port, port + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no free port pair in {low}-{high}")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def find_java(pid: int) -> int | None:
    """`pid` if it is the JVM, else the first java process among its descendants."""
    todo = [pid]
    while todo:
        p = todo.pop(0)
        if _comm(p) == "java":
            return p
        todo.extend(_children(p))
    return None


class KafkaReference:
    """One Apache Kafka broker from the anchor, on a fresh data dir; start(), stop(),
    cleanup(). `pid` is the JVM's."""

    def __init__(self, settings: dict[str, str] | None = None, log_path: str | None = None):
        anchor = anchor_dir()
        if anchor is None:
            raise RuntimeError(unavailable_reason())
        self.serve = os.path.join(anchor, "serve.sh")
        self.settings = {**REF_SETTINGS, **(settings or {})}
        self.data_dir = tempfile.mkdtemp(prefix="kafka-ref-")
        self.log_path = log_path or os.path.join(self.data_dir, "serve.out")
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> Startup:
        """Spawn serve.sh and wait (bounded) until Metadata is answered. The figure includes
        serve.sh formatting the empty data dir (a separate JVM run), as any first start does."""
        self.port = free_port_pair()
        cmd = [self.serve, str(self.port), self.data_dir,
               *(f"{k}={v}" for k, v in self.settings.items())]
        log = open(self.log_path, "ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        try:
            startup = wait_until_serving(self.proc, "127.0.0.1", self.port, t0, timeout)
        except Exception:
            tail = self.read_log()[-2000:]
            self.stop()
            raise RuntimeError(f"Apache Kafka did not start:\n{tail}") from None
        self.pid = find_java(self.proc.pid)
        if self.pid is None:
            self.stop()
            raise RuntimeError("Apache Kafka answers but no java process was found under "
                               f"serve.sh (pid {self.proc.pid})")
        return startup

    def read_log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after `timeout` s."""
        if self.proc is None:
            return None
        targets = [p for p in {self.proc.pid, self.pid} if p]
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            if self.proc.poll() is not None and self.pid in (None, self.proc.pid):
                break
            for p in targets:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
