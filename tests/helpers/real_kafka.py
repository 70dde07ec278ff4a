# A real Apache Kafka 3.8.0 for differential tests: the reference kafkalite is compared with.
#
#   def test_same_answer(real_kafka, kafka_broker):   # real_kafka: "127.0.0.1:PORT"
#
# RealKafka runs the anchor's `serve.sh PORT DATA_DIR [key=value ...]` (a single KRaft node,
# broker and controller in one JVM, listening on 127.0.0.1:PORT, its controller on PORT+1)
# and waits until Metadata answers with a broker. The anchor is found through
# KAFKA_ANCHOR_DIR, else `../shared/anchors/kafka-3.8.0` from the repository root (the parent
# of tests/), else /work/shared/anchors/kafka-3.8.0. The `real_kafka` fixture (session
# scope: the JVM takes 2-5 s and ~400 MiB) skips with the reason when the anchor or Java 17+
# is missing (scripts/setup-java.sh installs Java). REAL_KAFKA_BOOTSTRAP=host:port uses a
# Kafka already running (serve.sh) instead of starting one.
#
# Kafka applies admin changes asynchronously (the controller commits, then the broker's
# metadata cache catches up), so tests poll for their effect with `eventually`.
from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, Callable, Iterator

import pytest

from kafkalite.testing import BrokerProcess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FALLBACK_ANCHOR = "/work/shared/anchors/kafka-3.8.0"
START_TIMEOUT_S = 60.0


def anchor_dir() -> str | None:
    """The Kafka distribution to run, or None when there is none."""
    candidates = [os.environ.get("KAFKA_ANCHOR_DIR"),
                  os.path.join(REPO_ROOT, "..", "shared", "anchors", "kafka-3.8.0"),
                  FALLBACK_ANCHOR]
    for path in candidates:
        if path and os.path.isfile(os.path.join(path, "serve.sh")):
            return os.path.abspath(path)
    return None


def java_major() -> int:
    """The major version of `java` on PATH (JAVA_HOME first, as Kafka's scripts), 0 if none."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return 0
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return 0
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def unavailable_reason() -> str | None:
    """Why a real Kafka cannot run here, or None when it can."""
    if anchor_dir() is None:
        return ("no Kafka anchor: set KAFKA_ANCHOR_DIR or provide "
                "../shared/anchors/kafka-3.8.0 (serve.sh)")
    major = java_major()
    if major < 17:
        return (f"Kafka 3.8 here needs Java 17+ (found {major or 'none'}): "
                "run scripts/setup-java.sh")
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pair(low: int = 20000, high: int = 32766) -> int:
    """A port below 32768 whose successor is free too (the controller listens there)."""
    for _ in range(200):
        port = random.randint(low, high)
        if _port_free(port) and _port_free(port + 1):
            return port
    raise RuntimeError("no free pair of ports below 32768")


def metadata_ready(bootstrap: str, timeout: float = 2.0) -> bool:
    """True once Metadata v1 answers with at least one broker."""
    from kafka.protocol.metadata import MetadataRequest

    from .kbatch import call, connect
    try:
        with connect(bootstrap, timeout) as s:
            return bool(call(s, MetadataRequest[1](topics=[])).brokers)
    except Exception:  # not listening yet, or answering before it is ready
        return False


class RealKafka(BrokerProcess):
    """One Apache Kafka broker process, handled as a kafkalite BrokerProcess is (stop: SIGTERM,
    then SIGKILL; read_log; cleanup): start() waits, bounded, until Metadata answers."""

    def __init__(self, data_dir: str | None = None, port: int | None = None,
                 settings: dict[str, str] | None = None):
        anchor = anchor_dir()
        if anchor is None:
            raise RuntimeError(unavailable_reason())
        super().__init__(data_dir=data_dir or tempfile.mkdtemp(prefix="real-kafka-"),
                         port=port or free_port_pair())
        self._own_dir = data_dir is None
        self.serve = os.path.join(anchor, "serve.sh")
        self.settings = dict(settings or {})  # Kafka's own: none of kafkalite's test settings
        self.log_path = os.path.join(self.data_dir, "serve.out")

    def command(self) -> list[str]:
        # serve.sh execs the JVM: the process started is the broker itself.
        return [self.serve, str(self.port), self.data_dir,
                *(f"{k}={v}" for k, v in self.settings.items())]

    def start(self, timeout: float = START_TIMEOUT_S) -> "RealKafka":
        os.makedirs(self.data_dir, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}:\n"
                                   + self.read_log()[-4000:])
            if metadata_ready(self.bootstrap):
                return self
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"Kafka did not answer Metadata within {timeout:.0f} s:\n"
                           + self.read_log()[-4000:])


def eventually(probe: Callable[[], Any], accept: Callable[[Any], bool],
               timeout: float = 15.0, interval: float = 0.1) -> Any:
    """Call probe() until accept(result) (bounded); returns the last result either way, so
    the caller's assertion shows what was seen."""
    deadline = time.monotonic() + timeout
    result = probe()
    while not accept(result) and time.monotonic() < deadline:
        time.sleep(interval)
        result = probe()
    return result


def create_topic(bootstrap: str, name: str, configs: dict[str, str] | None = None,
                 partitions: int = 1) -> None:
    """Create a topic with raw CreateTopics v7 and wait (bounded) until Metadata shows it with
    its leaders, as a client would before producing to it."""
    from kafka.protocol.admin import CreateTopicsRequest
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.consumer import ListOffsetsRequest

    from .kbatch import call, connect
    Req = CreateTopicsRequest[7]
    T = Req.CreatableTopic
    req = Req(topics=[T(name=name, num_partitions=partitions, replication_factor=1,
                        assignments=[],
                        configs=[T.CreatableTopicConfig(name=k, value=v)
                                 for k, v in (configs or {}).items()])],
              timeout_ms=15000, validate_only=False)
    with connect(bootstrap) as s:
        t = call(s, req).topics[0]
        assert t.error_code == 0, (t.error_code, t.error_message)
        meta = MetadataRequest[1](topics=[MetadataRequest[1].MetadataRequestTopic(name=name)])
        ready = eventually(lambda: call(s, meta).topics[0],
                           lambda t: t.error_code == 0 and len(t.partitions) == partitions
                           and all(p.leader_id >= 0 for p in t.partitions))
        assert ready.error_code == 0, ready
        # Kafka's KRaft broker publishes a new topic to its metadata cache before its replica
        # manager becomes the partitions' leader: a Produce in between gets
        # NOT_LEADER_OR_FOLLOWER. A ListOffsets answered without error means it is leader.
        Lo = ListOffsetsRequest[7]
        T = Lo.ListOffsetsTopic
        probe = Lo(replica_id=-1, isolation_level=0, topics=[T(name=name, partitions=[
            T.ListOffsetsPartition(partition_index=p, timestamp=-1, current_leader_epoch=-1)
            for p in range(partitions)])])
        led = eventually(lambda: call(s, probe).topics[0].partitions,
                         lambda ps: all(p.error_code == 0 for p in ps))
        assert all(p.error_code == 0 for p in led), led


_SHARED: dict[str, Any] = {"kafka": None, "users": 0}


@contextlib.contextmanager
def session_kafka() -> Iterator[str]:
    """The bootstrap address of the real Kafka that every session fixture of the run shares
    (tests/ and compat_tests/ each have one, and a JVM is ~400 MiB): started on first use,
    stopped when the last user is done. REAL_KAFKA_BOOTSTRAP names one already running
    (started by serve.sh) instead. Skips with the reason when none can run here."""
    running = os.environ.get("REAL_KAFKA_BOOTSTRAP")
    if running:
        yield running
        return
    if _SHARED["kafka"] is None:
        reason = unavailable_reason()
        if reason is not None:
            pytest.skip(reason)
        kafka = RealKafka()
        try:
            kafka.start()
        except BaseException:
            kafka.cleanup()
            raise
        _SHARED["kafka"] = kafka
    _SHARED["users"] += 1
    try:
        yield _SHARED["kafka"].bootstrap
    finally:
        _SHARED["users"] -= 1
        if not _SHARED["users"]:
            _SHARED["kafka"].cleanup()
            _SHARED["kafka"] = None


@contextlib.contextmanager
def private_kafka(settings: dict[str, str] | None = None) -> Iterator[str]:
    """A real Kafka of the caller's own, for suites whose answers would see what other
    tests left on the shared one (topic and group listings, producer ids, internal topics).
    Skips with the reason when none can run here."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    kafka = RealKafka(settings=settings)
    try:
        kafka.start()
        yield kafka.bootstrap
    finally:
        kafka.cleanup()


@pytest.fixture(scope="session")
def real_kafka() -> Iterator[str]:
    """The bootstrap address of a real Apache Kafka 3.8 shared by the session."""
    with session_kafka() as bootstrap:
        yield bootstrap


@pytest.fixture(params=["kafkalite", "kafka"])
def any_broker(request: pytest.FixtureRequest) -> str:
    """The test runs against kafkalite (`kafka_broker`) and against the real Kafka: the
    same assertions hold for both, so the expectations are Kafka's own answers."""
    return request.getfixturevalue("kafka_broker" if request.param == "kafkalite"
                                   else "real_kafka")
