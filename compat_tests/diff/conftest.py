# Fixtures for the response diff: the same requests go to a kafkalite spawned for the session
# and to a real Apache Kafka 3.8.0 of the diff's own (tests/helpers/real_kafka.py
# private_kafka; the session skips with the reason where Java 17 or the anchor is missing). Both get the same topics, records and committed group before any case runs, under
# the same names, so their answers can be compared field by field.
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from compat_tests import wire
from tests.helpers.real_kafka import private_kafka

# kafkalite with Kafka's defaults, and serve.sh's node id and rebalance delay, so node ids
# need no normalising.
LITE_SETTINGS = {"node.id": "1", "group.initial.rebalance.delay.ms": "0",
                 "log.retention.check.interval.ms": "300000"}
DATA_TOPIC, TWO_TOPIC, GROUP = "diff-data", "diff-two", "diff-group"
# Records carry one timestamp fixed for the session (their bytes must match on both brokers),
# recent enough that retention keeps them.
FIXED_TS = int(time.time() * 1000) - 60_000
RECORDS = [(b"k0", b"v0", [("h", b"0")]), (None, b"v1", []), (b"k2", b"v2", [])]
COUNTS: dict[str, int] = {"compared": 0, "differing": 0, "deliberate": 0}


@dataclass
class Side:
    """One broker under comparison."""
    name: str
    bootstrap: str
    versions: dict[int, tuple[int, int]]
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)

    def conn(self) -> wire.Conn:
        return wire.Conn(self.bootstrap)

    def call(self, api_key: int, version: int, fields: dict[str, Any] | None = None) -> Any:
        with self.conn() as c:
            return c.call(api_key, version, fields or {})

    def wait_topic(self, name: str, partitions: int, timeout: float = 15.0) -> None:
        """Kafka applies CreateTopics asynchronously: wait (bounded) for leaders and id."""
        deadline = time.monotonic() + timeout
        while True:
            t = self.call(3, 12, {"topics": [{"name": name}],
                                  "allow_auto_topic_creation": False}).topics[0]
            if t.error_code == 0 and len(t.partitions) == partitions \
                    and all(p.leader_id >= 0 for p in t.partitions):
                self.topic_ids[name] = t.topic_id
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: topic {name} not ready: {t}")
            time.sleep(0.1)


def create_topic(side: Side, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    r = side.call(19, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 15000, "validate_only": False})
    assert r.topics[0].error_code == 0, (side.name, r.topics[0])
    side.wait_topic(name, partitions)


def produce(side: Side, topic: str, partition: int, records: list, version: int = 9) -> Any:
    from compat_tests.protocol_cases import batch
    return side.call(0, version, {"transactional_id": None, "acks": -1, "timeout_ms": 15000,
                                  "topic_data": [{"name": topic, "partition_data": [
                                      {"index": partition,
                                       "records": batch(records, timestamp=FIXED_TS)}]}]})


def ready_coordinator(side: Side, group: str, timeout: float = 30.0) -> None:
    """Kafka creates __consumer_offsets on the first FindCoordinator and answers
    COORDINATOR_NOT_AVAILABLE (15) / LOAD_IN_PROGRESS (14) until it is loaded: wait, bounded."""
    deadline = time.monotonic() + timeout
    while True:
        r = side.call(10, 2, {"key": group, "key_type": 0})
        if r.error_code == 0:
            return
        if r.error_code not in (14, 15) or time.monotonic() > deadline:
            raise AssertionError(f"{side.name}: FindCoordinator {group}: {r}")
        time.sleep(0.2)


def ready_txn_coordinator(side: Side, timeout: float = 60.0) -> None:
    """Kafka creates __transaction_state on the first transactional FindCoordinator and answers
    NOT_COORDINATOR / LOAD_IN_PROGRESS / NOT_AVAILABLE until its partitions are loaded; the txn
    cases hash their ids over all partitions, so wait until a spread of ids answers: bounded.
    Called by the txn cases, not by prepare(): `find-coordinator-transaction`, which runs
    earlier, pins Kafka's answer while the topic does not exist yet."""
    ids = [f"diff-txn-ready-{i}" for i in range(24)]
    deadline = time.monotonic() + timeout
    while True:
        r = side.call(10, 4, {"key_type": 1, "coordinator_keys": ids})
        codes = {c.error_code for c in r.coordinators}
        if codes == {0}:
            d = side.call(65, 0, {"transactional_ids": ids})
            codes = {t.error_code for t in d.transaction_states} - {105}  # TRANSACTIONAL_ID_NOT_FOUND
            if not codes or codes == {0}:
                return
        if not codes <= {14, 15, 16} or time.monotonic() > deadline:
            raise AssertionError(f"{side.name}: transaction coordinator not ready: {r}")
        time.sleep(0.2)


def prepare(side: Side) -> Side:
    create_topic(side, DATA_TOPIC, 1, {"retention.ms": "86400000"})
    create_topic(side, TWO_TOPIC, 2)
    r = produce(side, DATA_TOPIC, 0, RECORDS)
    assert r.responses[0].partition_responses[0].error_code == 0, r
    # An empty group with a committed offset: OffsetCommit v2 with generation -1 and no member
    # is the "simple consumer" commit both brokers accept.
    ready_coordinator(side, GROUP)
    deadline = time.monotonic() + 30
    while True:  # Kafka answers NOT_COORDINATOR until __consumer_offsets is loaded
        r = side.call(8, 2, {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                             "member_id": "", "retention_time_ms": -1, "topics": [
                                 {"name": DATA_TOPIC, "partitions": [
                                     {"partition_index": 0, "committed_offset": 2,
                                      "committed_metadata": "m"}]}]})
        code = r.topics[0].partitions[0].error_code
        if code not in (14, 15, 16) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert code == 0, r
    return side


@pytest.fixture(scope="session")
def lite_side() -> Iterator[Side]:
    from kafkalite.testing import BrokerProcess
    broker = BrokerProcess(settings=LITE_SETTINGS).start()
    try:
        side = Side("kafkalite", broker.bootstrap, wire.api_versions(broker.bootstrap))
        yield prepare(side)
    finally:
        broker.cleanup()


@pytest.fixture(scope="session")
def kafka_side() -> Iterator[Side]:
    # A Kafka of the diff's own: on the one other suites share, listings (groups, topics),
    # producer ids and __transaction_state would reflect what they did.
    with private_kafka() as bootstrap:
        yield prepare(Side("kafka", bootstrap, wire.api_versions(bootstrap)))


@pytest.fixture(scope="session")
def sides(lite_side: Side, kafka_side: Side) -> tuple[Side, Side]:
    return lite_side, kafka_side


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if COUNTS["compared"]:
        terminalreporter.write_line(
            "response diff: {compared} (case, version) answers compared, {differing} differ, "
            "{deliberate} of them as documented deliberate differences".format(**COUNTS))
