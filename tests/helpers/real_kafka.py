# The real Apache Kafka (the anchor build's serve.sh) as a second target for differential
# tests: same raw sockets, two brokers, one expected behaviour.
#
#   with RealKafka(tmp_path, {"connections.max.idle.ms": "2000"}) as k:
#       k.bootstrap
#
# The build is found at $KAFKALITE_KAFKA_HOME, else at shared/anchors/kafka-3.8.0 in a
# parent directory of the repository; `RealKafka.missing()` says why it cannot run.
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

ANCHOR = Path("shared") / "anchors" / "kafka-3.8.0"


def kafka_home() -> Path | None:
    env = os.environ.get("KAFKALITE_KAFKA_HOME")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        if (parent / ANCHOR / "serve.sh").exists():
            return parent / ANCHOR
    return None


class RealKafka:
    """A single-node Kafka 3.8 on 127.0.0.1 (a free port below 32768), stopped on exit."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.settings = settings or {}
        self.port = _free_low_port()
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def missing() -> str | None:
        home = kafka_home()
        if home is None:
            return (f"Apache Kafka not found: set KAFKALITE_KAFKA_HOME or put the build at "
                    f"../{ANCHOR}")
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            return "Apache Kafka needs Java 17 (java on PATH or JAVA_HOME)"
        return None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> "RealKafka":
        home = kafka_home()
        assert home is not None, self.missing()
        env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m -Xms256m"}
        out = open(self.data_dir / "serve.out", "ab")
        self.proc = subprocess.Popen(
            [str(home / "serve.sh"), str(self.port), str(self.data_dir),
             *(f"{k}={v}" for k, v in self.settings.items())],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}")
            if _answers_api_versions(self.port):
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("Kafka did not answer ApiVersions in time")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> "RealKafka":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _free_low_port() -> int:
    # Below the ephemeral range (32768+), as asked; Kafka's controller takes PORT+1.
    start = random.randrange(20000, 32000)
    for port in [*range(start, 32766), *range(20000, start)]:
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
                return port
        except OSError:
            continue
    raise RuntimeError("no free port pair below 32768")


def _answers_api_versions(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.settimeout(2.0)
            s.sendall(struct.pack(">ihhih", 10, 18, 0, 7, -1))
            head = s.recv(4)
            return len(head) == 4
    except OSError:
        return False
