# A real ZooKeeper server for the cluster tests (issue 17): one standalone server per test
# session, each test isolated under its own chroot (`/kl-<uuid>`, see `chroot_connect`).
#
#   def test_x(zookeeper):            # "127.0.0.1:PORT"
#       connect = chroot_connect(zookeeper)   # "127.0.0.1:PORT/kl-<uuid>"
#
# ZkModeKafka is the reference for the cluster: an Apache Kafka 3.8.0 broker in ZooKeeper
# mode (no process.roles) on such a server, under a chroot of its own.
#
# The server comes, in this order, from the Kafka anchor's ZooKeeper 3.8.4
# (../shared/anchors/kafka-3.8.0/bin/zookeeper-server-start.sh, found as real_kafka.py finds
# the anchor), then from Debian's `zookeeper` package (/usr/share/java/zookeeper.jar, which
# scripts/setup-zookeeper.sh installs where the anchor is missing); else the fixture skips
# with the reason. It always runs with a config file of our own (never the shipped
# config/zookeeper.properties: dataDir=/tmp/zookeeper, port 2181) listening on 127.0.0.1 only,
# and with tickTime 200 plus explicit session-timeout bounds, so that tests can ask for 1-2 s
# sessions (the server otherwise clamps them to 2-20 ticks).
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Iterator, Sequence

import pytest

from kafkalite.testing import BrokerProcess

from .real_kafka import (RealKafka, anchor_dir, free_port_pair, java_major,
                         unavailable_reason as kafka_unavailable_reason)

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
START_TIMEOUT_S = 60.0
MIN_SESSION_TIMEOUT_MS = 1000
MAX_SESSION_TIMEOUT_MS = 30000


def server_command(config: str) -> list[str] | None:
    """The command that runs a ZooKeeper server on `config`, or None when there is none."""
    anchor = anchor_dir()
    if anchor is not None:
        script = os.path.join(anchor, "bin", "zookeeper-server-start.sh")
        if os.path.isfile(script):
            # execs kafka-run-class.sh, which execs the JVM: the process started is the server
            return [script, config]
    if os.path.isfile(DEBIAN_JAR):
        java = shutil.which("java") or "/usr/bin/java"
        # Debian's jar names its dependencies in its manifest's Class-Path
        # (/etc/zookeeper/conf_example/environment puts only it on the class path)
        return [java, "-Xmx64M", "-cp", DEBIAN_JAR,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", config]
    return None


def unavailable_reason() -> str | None:
    """Why no ZooKeeper server can run here, or None when one can."""
    if server_command("zoo.cfg") is None:
        return ("no ZooKeeper: neither the Kafka anchor (../shared/anchors/kafka-3.8.0, "
                f"bin/zookeeper-server-start.sh) nor Debian's {DEBIAN_JAR}: "
                "run scripts/setup-zookeeper.sh")
    if java_major() < 8:
        return "ZooKeeper needs Java: run scripts/setup-java.sh"
    return None


def four_letter(address: tuple[str, int], word: str, timeout: float = 2.0) -> str:
    """The answer to a ZooKeeper four-letter command (`ruok`, `srvr`), '' when unreachable."""
    try:
        with socket.create_connection(address, timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(word.encode())
            chunks = []
            while len(b"".join(chunks)) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def chroot_connect(connect: str) -> str:
    """`connect` with a fresh chroot (`/kl-<uuid>`): a test's own namespace on the shared
    server. The chroot node is created by whoever connects first (kafkalite.cluster.zk's
    ensure_chroot, as Kafka creates its own)."""
    return f"{connect}/kl-{uuid.uuid4().hex}"


class ZooKeeperProcess(BrokerProcess):
    """One standalone ZooKeeper server on host:port (127.0.0.1 unless told: a network
    partition test binds it to its bridge's address) with its data under data_dir, handled
    as a BrokerProcess is (stop: SIGTERM then SIGKILL, kill, restart, cleanup)."""

    def __init__(self, port: int | None = None, data_dir: str | None = None,
                 host: str = "127.0.0.1"):
        own_dir = data_dir is None
        data_dir = data_dir or tempfile.mkdtemp(prefix="zookeeper-")
        super().__init__(data_dir=data_dir, port=port or free_port_pair(),
                         log_path=os.path.join(data_dir, "server.out"), host=host)
        self._own_dir = own_dir  # cleanup() removes only a directory it made
        self.config = os.path.join(self.data_dir, "zoo.cfg")
        self.log_dir = os.path.join(self.data_dir, "logs")

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def connect(self) -> str:
        return self.bootstrap

    def _write_config(self) -> None:
        os.makedirs(os.path.join(self.data_dir, "data"), exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        with open(self.config, "w") as f:
            f.write("\n".join([
                f"dataDir={os.path.join(self.data_dir, 'data')}",
                f"clientPort={self.port}",
                f"clientPortAddress={self.host}",
                "admin.enableServer=false",
                "maxClientCnxns=0",
                "4lw.commands.whitelist=srvr,ruok",
                "tickTime=200",
                f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}",
                f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
                ""]))

    def start(self, timeout: float = START_TIMEOUT_S) -> "ZooKeeperProcess":
        """Start the server and wait, bounded, until it answers `ruok` with `imok` and
        serves requests (`srvr` tells its mode)."""
        self._write_config()
        command = server_command(self.config)
        if command is None:
            raise RuntimeError(unavailable_reason())
        env = {**os.environ,
               # the anchor is read-only: kafka-run-class.sh would put its logs in it
               "LOG_DIR": self.log_dir,
               "EXTRA_ARGS": "-name zookeeper",  # no -loggc: no GC log
               "KAFKA_HEAP_OPTS": "-Xmx64M -Xms64M"}
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n"
                                   + self.read_log()[-4000:])
            # `imok` only says the process runs: it answers before the server serves
            # requests, when `srvr` still says "not currently serving requests"
            if (four_letter(self.address, "ruok", timeout=1.0) == "imok"
                    and "Mode: " in four_letter(self.address, "srvr", timeout=1.0)):
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"ZooKeeper did not serve within {timeout:.0f} s:\n"
                           + self.read_log()[-4000:])


class ZkModeKafka(RealKafka):
    """An Apache Kafka 3.8.0 broker in ZooKeeper mode (the anchor's kafka-server-start.sh with
    a server.properties of our own): zookeeper.connect, broker.id, one PLAINTEXT listener on
    `host` (127.0.0.1 unless told), its log.dirs; `settings` are added to the file; `prefix`
    goes before the command (as BrokerProcess's: `ip netns exec NS`). Started and stopped as
    a RealKafka (start waits, bounded, until Metadata answers)."""

    def __init__(self, zookeeper_connect: str, broker_id: int = 0,
                 settings: dict[str, str] | None = None, data_dir: str | None = None,
                 host: str = "127.0.0.1", prefix: list[str] | None = None):
        super().__init__(data_dir=data_dir, settings=settings)
        self.host = host
        self.prefix = list(prefix or [])
        self.zookeeper_connect = zookeeper_connect
        self.broker_id = broker_id
        self.properties = os.path.join(self.data_dir, "server.properties")

    def command(self) -> list[str]:
        lines = {"broker.id": str(self.broker_id),
                 "zookeeper.connect": self.zookeeper_connect,
                 "listeners": f"PLAINTEXT://{self.host}:{self.port}",
                 "log.dirs": os.path.join(self.data_dir, "logs"),
                 "offsets.topic.replication.factor": "1",
                 "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1",
                 "group.initial.rebalance.delay.ms": "0",
                 **self.settings}
        with open(self.properties, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in lines.items())
        script = os.path.join(os.path.dirname(self.serve), "bin", "kafka-server-start.sh")
        # env execs the script, which execs the JVM: the process started is the broker
        return [*self.prefix, "env", f"LOG_DIR={os.path.join(self.data_dir, 'applogs')}",
                "KAFKA_HEAP_OPTS=-Xmx256M -Xms256M", "EXTRA_ARGS=-name kafkaServer",
                script, self.properties]


@contextlib.contextmanager
def kafka_on_zookeeper(zookeeper: str, ids: Sequence[int],
                       settings: dict[str, str] | None = None,
                       places: dict[int, tuple[str, list[str]]] | None = None
                       ) -> Iterator[tuple[str, dict]]:
    """Kafka 3.8 brokers `ids` in ZooKeeper mode on a chroot of their own of `zookeeper`,
    started: yields (their zookeeper.connect, {id: ZkModeKafka}); skips the test when the
    Kafka anchor is missing. Stopped and removed afterwards. `places` gives a broker its
    (host, command prefix): tests.helpers.netns puts each in a network namespace."""
    if (reason := kafka_unavailable_reason()) is not None:
        pytest.skip(reason)
    connect = f"{zookeeper}/kafka-ref-{uuid.uuid4().hex}"
    where = places or {}
    brokers = {i: ZkModeKafka(connect, broker_id=i, settings=settings,
                              host=where.get(i, ("127.0.0.1", []))[0],
                              prefix=where.get(i, ("127.0.0.1", []))[1]) for i in ids}
    try:
        for b in brokers.values():
            b.start()
        yield connect, brokers
    finally:
        for b in brokers.values():
            if b.proc is not None:
                b.proc.send_signal(signal.SIGCONT)  # a test may have left it stopped
            b.cleanup()


# --- expiring a client's session from outside --------------------------------------------
# ZooKeeper derives a session's password from its id (ZooKeeperServer.generatePasswd:
# java.util.Random seeded with the id xor a fixed "superSecret", 16 bytes of nextBytes), and
# the session id of a broker is the ephemeralOwner of its /brokers/ids/<id>. A second client
# that attaches to that session and closes it ends it, as an expiry would: its ephemeral
# znodes go at once and its owner is told SESSION_EXPIRED when it reconnects (the classic
# test trick; Curator's KillSession and Kafka's tests do it with the password in hand).

_JAVA_RANDOM_MULTIPLIER = 0x5DEECE66D
_JAVA_RANDOM_MASK = (1 << 48) - 1
_ZOOKEEPER_SUPER_SECRET = 0xB3415C00


def _java_random_bytes(seed: int, n: int) -> bytes:
    """java.util.Random(seed).nextBytes(new byte[n])."""
    seed = (seed ^ _JAVA_RANDOM_MULTIPLIER) & _JAVA_RANDOM_MASK
    out = bytearray()
    while len(out) < n:
        seed = (seed * _JAVA_RANDOM_MULTIPLIER + 0xB) & _JAVA_RANDOM_MASK
        word = seed >> 16  # next(32)
        for _ in range(min(n - len(out), 4)):
            out.append(word & 0xFF)
            word >>= 8
    return bytes(out)


def session_password(session_id: int) -> bytes:
    """The password ZooKeeper gave session `session_id`."""
    return _java_random_bytes(session_id ^ _ZOOKEEPER_SUPER_SECRET, 16)


def expire_session(connect: str, session_id: int, timeout_s: float = 10.0) -> None:
    """End session `session_id` on the server at `connect` (host:port, chroot allowed) from
    outside: attach to it with its password, then close it."""
    from kazoo.client import KazooClient
    client = KazooClient(hosts=connect, timeout=timeout_s,
                         client_id=(session_id, session_password(session_id)))
    client.start(timeout=timeout_s)
    try:
        if client.client_id[0] != session_id:  # the server gave a new one: it was gone
            raise RuntimeError(f"session {session_id:#x} is not alive")
    finally:
        client.stop()
        client.close()
