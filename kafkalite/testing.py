# pytest plugin (entry point `pytest11: kafkalite`): a real kafkalite broker for tests.
#
#   def test_roundtrip(kafka_broker, kafka_topic):
#       topic = kafka_topic(partitions=3)
#       producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker})
#
# `kafka_broker` is session-scoped: one broker subprocess on a free 127.0.0.1 port with a
# temporary data directory, yielding its bootstrap address. `kafka_broker_fresh` is a broker
# of the test's own. Both take their settings from `kafka_broker_config` (the ini option
# `kafkalite_broker_config` unless a conftest overrides the fixture). `kafka_topic` creates
# topics through kafkalite's own wire layer, never a client library: importing one into the
# user's test run is what printed its DeprecationWarnings there. `BrokerProcess` is the
# underlying handle, for tests that restart or kill the broker.
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Callable, Iterator

TEST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.check.interval.ms": "1000",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """A kafkalite broker in a subprocess: start, stop (SIGTERM), kill (SIGKILL), restart.
    `host` is the address it listens on; `prefix` goes before its command, a launcher that
    execs the rest (`ip netns exec NS`: the broker in a network namespace of a test's own)."""

    def __init__(self, data_dir: str | None = None, port: int | None = None,
                 settings: dict[str, str] | None = None, log_path: str | None = None,
                 host: str = "127.0.0.1", prefix: list[str] | None = None):
        self._own_dir = data_dir is None
        self.host = host
        self.prefix = list(prefix or [])
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kafkalite-")
        self.port = port or free_port()
        self.settings = {**TEST_SETTINGS, **(settings or {})}
        # Hidden, so that a fresh data directory holding only this log still counts as empty
        # (kafkalite refuses a non-empty directory without meta.properties).
        self.log_path = log_path or os.path.join(self.data_dir, ".broker.log")
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [*self.prefix, sys.executable, "-m", "kafkalite", "serve",
               "--set", f"listeners=PLAINTEXT://{self.host}:{self.port}",
               "--set", f"log.dirs={self.data_dir}"]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        return cmd

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafkalite exited with {self.proc.returncode}:\n"
                                   + self.read_log()[-4000:])
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("kafkalite did not start listening in time:\n"
                           + self.read_log()[-4000:])

    def read_log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self, hard: bool = False) -> "BrokerProcess":
        self.kill() if hard else self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()


try:
    import pytest
except ImportError:  # BrokerProcess works without pytest; the fixtures need it
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    INI_OPTION = "kafkalite_broker_config"

    def pytest_addoption(parser: "pytest.Parser") -> None:
        parser.addini(INI_OPTION, type="args", default=[],
                      help="broker settings for kafkalite's fixtures: key=value ...")

    def parse_settings(items: list[str]) -> dict[str, str]:
        """['key=value', ...] -> dict; a UsageError names an item without '='."""
        settings: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise pytest.UsageError(f"{INI_OPTION}: expected key=value, got {item!r}")
            settings[key.strip()] = value.strip()
        return settings

    @pytest.fixture(scope="session")
    def kafka_broker_config(pytestconfig: "pytest.Config") -> dict[str, str]:
        """Broker settings (Kafka property names) for kafka_broker and kafka_broker_fresh:
        the ini option `kafkalite_broker_config`; override this fixture to compute them."""
        return parse_settings(pytestconfig.getini(INI_OPTION))

    def _serve(settings: dict[str, str], throwaway: bool) -> Iterator[str]:
        broker = BrokerProcess(settings=settings).start()
        try:
            yield broker.bootstrap
        finally:
            if throwaway:  # its data is deleted next, so a clean shutdown only costs time
                broker.kill()
            broker.cleanup()

    @pytest.fixture(scope="session")
    def kafka_broker(kafka_broker_config: dict[str, str]) -> Iterator[str]:
        """Bootstrap address of a session-wide kafkalite broker."""
        yield from _serve(kafka_broker_config, throwaway=False)

    @pytest.fixture
    def kafka_broker_fresh(kafka_broker_config: dict[str, str]) -> Iterator[str]:
        """Bootstrap address of a broker of this test's own, with an empty data directory."""
        yield from _serve(kafka_broker_config, throwaway=True)

    @pytest.fixture
    def kafka_topic(request: "pytest.FixtureRequest") -> Iterator[Callable[..., str]]:
        """Factory: kafka_topic(partitions=1, name=None, config=None) -> a new topic's name,
        on the test's kafka_broker_fresh if it uses one, else on kafka_broker. The topics are
        deleted when the test ends."""
        # imported here, not with the plugin: kio registers hypothesis strategies on import,
        # which warns when that happens before hypothesis's own pytest plugin has loaded
        from .admin_wire import AdminWire

        fresh = "kafka_broker_fresh" in request.fixturenames
        bootstrap = request.getfixturevalue("kafka_broker_fresh" if fresh else "kafka_broker")
        made: list[str] = []

        def create(partitions: int = 1, name: str | None = None,
                   config: dict[str, str] | None = None) -> str:
            topic = name or f"test-{uuid.uuid4().hex[:12]}"
            with AdminWire(bootstrap, client_id="kafkalite-fixture") as admin:
                admin.create_topic(topic, partitions, config)
            made.append(topic)
            return topic

        yield create
        if made:
            # errors per topic are ignored: the test may have deleted its topics itself
            with AdminWire(bootstrap, client_id="kafkalite-fixture") as admin:
                admin.delete_topics(made)
