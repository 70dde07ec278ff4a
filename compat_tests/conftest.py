# The compatibility suite's targets. Every test runs twice, its id naming the target: against
# `kafkalite` (a broker spawned for the session on a free 127.0.0.1 port, default settings
# except group.initial.rebalance.delay.ms=0) and against `kafka`, a real Apache Kafka 3.8
# (tests/helpers/real_kafka.py: the anchor's serve.sh, one JVM shared by the whole run,
# which also runs with the initial rebalance delay at 0). Kafka is the reference: a test that
# fails against it is a broken test. COMPAT_TARGETS=kafkalite (or kafka) runs one of them;
# KAFKA_BOOTSTRAP=host:port runs the suite once against that broker instead (`external`).
#
# Broker settings a test depends on (auto-create, retention, ...) are read with DescribeConfigs;
# when the target is configured otherwise, target_with() starts a further broker of the same
# kind with those settings (an external target cannot be reconfigured: the test skips with the
# reason). Topic and group names carry a per-run uuid so runs against a long-lived Kafka never
# collide.
from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from compat_tests import wire
from tests.helpers import real_kafka

RUN_ID = uuid.uuid4().hex[:8]
_counter = itertools.count(1)

# Kafka's KafkaConfig defaults for what kafkalite's tests fixture overrides (the brief: defaults
# except the initial rebalance delay, which only slows group tests down).
SPAWN_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.check.interval.ms": "300000",
}

KINDS = ("kafkalite", "kafka")
TARGETS = ["external"] if os.environ.get("KAFKA_BOOTSTRAP") else \
    os.environ.get("COMPAT_TARGETS", ",".join(KINDS)).split(",")
if not set(TARGETS) <= {"external", *KINDS}:
    raise ValueError(f"COMPAT_TARGETS: {TARGETS}; choose among {KINDS}")

# Printed at the end of the run, per target: protocol (key, version) cases run and skipped.
PROTOCOL_COUNTS: dict[str, dict[str, int]] = {}
PROTOCOL_SKIPS: dict[str, list[str]] = {}


def count_protocol_cases(target: "Target", outcome: str, why: str = "", n: int = 1) -> None:
    counts = PROTOCOL_COUNTS.setdefault(target.kind, {"run": 0, "skipped": 0})
    counts[outcome] += n
    if why:
        PROTOCOL_SKIPS.setdefault(target.kind, []).append(why)


def unique(kind: str) -> str:
    """A topic or group name unique to this run."""
    return f"compat-{kind}-{RUN_ID}-{next(_counter)}"


@dataclass
class Target:
    bootstrap: str
    kind: str  # "kafkalite", "kafka" (both started by the suite) or "external"
    versions: dict[int, tuple[int, int]]
    node_ids: list[int] = field(default_factory=list)
    _configs: dict[str, str | None] | None = None
    created_topics: list[str] = field(default_factory=list)

    @property
    def spawned(self) -> bool:
        """Whether the suite started this broker (and can start another like it)."""
        return self.kind != "external"

    # -- protocol helpers ---------------------------------------------------------------

    def conn(self) -> wire.Conn:
        return wire.Conn(self.bootstrap)

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def version(self, api_key: int) -> int:
        """Highest version the target and kafka-python share; skip the test when none."""
        if api_key not in self.versions:
            pytest.skip(f"target does not advertise API key {api_key}")
        try:
            return wire.highest(self.versions, api_key)
        except LookupError as e:
            pytest.skip(str(e))

    def call(self, api_key: int, fields: dict[str, Any], version: int | None = None) -> Any:
        v = self.version(api_key) if version is None else version
        with self.conn() as c:
            return c.call(api_key, v, fields)

    # -- cluster facts --------------------------------------------------------------------

    def metadata(self, topics: list[str] | None) -> Any:
        v = self.version(3)
        fields = {"topics": None if topics is None else [{"name": t} for t in topics],
                  "allow_auto_topic_creation": False}
        return self.call(3, fields, v)

    def broker_config(self, name: str) -> str | None:
        """A broker setting read with DescribeConfigs (resource type BROKER = 4)."""
        if self._configs is None:
            node = str(self.node_ids[0])
            resp = self.call(32, {"resources": [{"resource_type": 4, "resource_name": node,
                                                 "configuration_keys": None}]})
            res = resp.results[0]
            assert res.error_code == 0, f"DescribeConfigs(BROKER {node}): {res}"
            self._configs = {c.name: c.value for c in res.configs}
        if name not in self._configs:
            pytest.fail(f"DescribeConfigs(BROKER) does not list {name}")
        return self._configs[name]

    def require_config(self, name: str, value: str) -> None:
        """Skip unless the target's broker setting `name` is `value`."""
        actual = self.broker_config(name)
        if actual != value:
            pytest.skip(f"needs broker setting {name}={value}; target has {actual}")

    # -- topics ------------------------------------------------------------------------

    def create_topic(self, name: str | None = None, partitions: int = 1,
                     config: dict[str, str] | None = None) -> str:
        name = name or unique("topic")
        resp = self.call(19, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (config or {}).items()]}],
            "timeout_ms": 15000, "validate_only": False})
        t = resp.topics[0]
        assert t.error_code == 0, f"CreateTopics {name}: {t}"
        self.created_topics.append(name)
        self.wait_for_leaders(name, partitions)
        return name

    def wait_for_leaders(self, name: str, partitions: int, timeout: float = 15.0) -> None:
        """Kafka creates topics asynchronously: wait until metadata shows every leader."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.metadata([name]).topics[0]
            if last.error_code == 0 and len(last.partitions) == partitions \
                    and all(p.leader_id >= 0 for p in last.partitions):
                return
            time.sleep(0.1)
        raise AssertionError(f"topic {name} has no leaders after {timeout}s: {last}")

    def delete_topics(self, names: list[str]) -> None:
        if names and self.supports(20):
            self.call(20, {"topic_names": names,
                           "topics": [{"name": n} for n in names], "timeout_ms": 15000})


def _spawn(kind: str, settings: dict[str, str]) -> Any:
    """A further broker of `kind` with `settings`, started; the caller cleans it up."""
    if kind == "kafka":
        broker = real_kafka.RealKafka(settings=settings)
        try:
            return broker.start()
        except BaseException:
            broker.cleanup()
            raise
    from kafkalite.testing import BrokerProcess
    return BrokerProcess(settings={**SPAWN_SETTINGS, **settings}).start()


def _connect(bootstrap: str, kind: str) -> Target:
    t = Target(bootstrap=bootstrap, kind=kind, versions=wire.api_versions(bootstrap))
    meta = t.metadata([])
    t.node_ids = sorted(b.node_id for b in meta.brokers)
    assert t.node_ids, f"metadata lists no brokers: {meta}"
    return t


@contextlib.contextmanager
def _session_broker(kind: str) -> Iterator[str]:
    if kind == "external":
        yield os.environ["KAFKA_BOOTSTRAP"]
    elif kind == "kafka":
        with real_kafka.session_kafka() as bootstrap:
            yield bootstrap
    else:
        broker = _spawn(kind, {})
        try:
            yield broker.bootstrap
        finally:
            broker.cleanup()


@pytest.fixture(scope="session", params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    with _session_broker(request.param) as bootstrap:
        t = _connect(bootstrap, request.param)
        yield t
        try:
            t.delete_topics(t.created_topics)
        except Exception:  # best effort: leave no litter on a long-lived Kafka
            pass


# What tests ask target_with() for, given to one further broker per kind: a test asking for a
# subset of these gets that broker. Auto-creation off (test_errors.py, aiokafka's missing-topic
# test) and a retention check every second (test_retention.py). One broker rather than one per
# setting: a Kafka JVM takes 5-10 s to start here and ~400 MiB, and its first retention check
# comes 30 s after the start (LogManager's initial task delay), so a broker started for the
# earlier tests has that behind it by the time test_retention.py runs.
FURTHER_SETTINGS = {"auto.create.topics.enable": "false",
                    "log.retention.check.interval.ms": "1000"}


@pytest.fixture(scope="session")
def target_with(target: Target):
    """Factory: target_with({"auto.create.topics.enable": "false"}) -> a Target whose broker
    has those settings: the session's target when it already has them, else a further broker
    of the target's kind started with them (skip for an external target)."""
    spawned: dict[tuple, tuple[Any, Target]] = {}

    def get(settings: dict[str, str]) -> Target:
        differ = {k: target.broker_config(k) for k, v in settings.items()
                  if target.broker_config(k) != v}
        if not differ:
            return target
        if not target.spawned:
            pytest.skip(f"needs broker settings {settings}; KAFKA_BOOTSTRAP target has {differ}")
        if settings.items() <= FURTHER_SETTINGS.items():
            settings = FURTHER_SETTINGS
        key = tuple(sorted(settings.items()))
        if key not in spawned:
            broker = _spawn(target.kind, settings)
            spawned[key] = (broker, _connect(broker.bootstrap, target.kind))
        return spawned[key][1]

    try:
        yield get
    finally:
        for broker, _t in spawned.values():
            broker.cleanup()


@pytest.fixture(scope="session")
def bootstrap(target: Target) -> str:
    return target.bootstrap


@pytest.fixture
def make_topic(target: Target):
    """Factory: make_topic(partitions=1, config=None) -> a new topic's name, leaders ready."""
    def create(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        return target.create_topic(partitions=partitions, config=config)
    return create


@pytest.fixture
def topic(make_topic) -> str:
    return make_topic()


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "kafkalite_gap(reason): asserts Apache Kafka's behaviour where kafkalite is "
        "known to differ (COMPATIBILITY.md); a strict xfail against the spawned "
        "kafkalite, an ordinary test against Kafka and KAFKA_BOOTSTRAP")


def pytest_collection_modifyitems(config, items) -> None:
    # Against the spawned kafkalite a known gap is an expected failure, and a strict one: once
    # kafkalite is fixed the test passes, the xfail turns into a failure and the marker must go.
    for item in items:
        gap = item.get_closest_marker("kafkalite_gap")
        callspec = getattr(item, "callspec", None)
        if gap is not None and callspec and callspec.params.get("target") == "kafkalite":
            item.add_marker(pytest.mark.xfail(reason=f"kafkalite gap: {gap.args[0]}",
                                              strict=True))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    for kind, counts in PROTOCOL_COUNTS.items():
        tr = terminalreporter
        tr.section(f"compat: protocol (api key, version) cases against {kind}")
        tr.write_line(f"{counts['run']} run, {counts['skipped']} skipped")
        for line in PROTOCOL_SKIPS.get(kind, []):
            tr.write_line(f"  skipped {line}")
