"""Dynamic broker configs (issue 10 item 10): AlterConfigs and IncrementalAlterConfigs on a
BROKER resource ("1" this node, "" the cluster-wide defaults) apply Kafka's dynamic configs at
once, persist them across a restart, describe them as DYNAMIC_BROKER_CONFIG /
DYNAMIC_DEFAULT_BROKER_CONFIG with their synonyms, and refuse what Kafka refuses, with
Kafka's error codes and messages. The first test makes the same changes on kafkalite and on
the real Kafka and compares the answers; the admin clients cannot name the resource "", so
that one goes through raw requests (tests/helpers/kconfigs.py)."""
from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, \
    ConfigResource, ResourceType
from kafka.admin import ConfigResource as KPConfigResource, ConfigResourceType, \
    KafkaAdminClient

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import build_batch, connect, fetch_raw, produce_raw
from tests.helpers.kconfigs import APPEND, BROKER, DELETE, SET, TOPIC, alter, \
    alter_incremental, describe
from tests.helpers.real_kafka import create_topic, eventually

BROKER_KEYS = ["log.retention.ms", "log.retention.hours", "message.max.bytes",
               "log.cleanup.policy", "log.roll.jitter.ms", "log.roll.jitter.hours",
               "log.segment.delete.delay.ms", "num.partitions", "num.io.threads",
               "no.such.config"]
TOPIC_KEYS = ["retention.ms", "max.message.bytes", "cleanup.policy", "segment.jitter.ms",
              "file.delete.delay.ms"]
INVALID_REQUEST, INVALID_CONFIG, MESSAGE_TOO_LARGE = 42, 40, 10


def _incremental(bootstrap: str, name: str, entries: list[tuple[str, AlterConfigOpType,
                                                                   str | None]]) -> tuple:
    """IncrementalAlterConfigs through confluent-kafka: (error code, message)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, op, v in entries])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
    except Exception as e:  # KafkaException(KafkaError)
        return e.args[0].code(), e.args[0].str()
    return 0, None


def _changes(bootstrap: str) -> list[tuple]:
    """The same sequence of changes, accepted and refused, on one broker."""
    return [
        _incremental(bootstrap, "1", [
            ("log.retention.ms", AlterConfigOpType.SET, "3600000"),
            ("message.max.bytes", AlterConfigOpType.SET, "2000000"),
            ("no.such.config", AlterConfigOpType.SET, "x"),
            ("log.segment.delete.delay.ms", AlterConfigOpType.SET, "1000"),
            ("log.cleanup.policy", AlterConfigOpType.APPEND, "compact"),
            ("num.io.threads", AlterConfigOpType.SET, "12")]),
        alter_incremental(bootstrap, BROKER, "", [
            ("log.retention.ms", SET, "7200000"), ("max.connections", SET, "1000"),
            ("log.roll.jitter.ms", SET, "5")]),
        # Refused, as Kafka refuses them.
        _incremental(bootstrap, "1", [("num.partitions", AlterConfigOpType.SET, "3")]),
        _incremental(bootstrap, "1", [("message.max.bytes", AlterConfigOpType.SET, "many")]),
        _incremental(bootstrap, "1", [("num.io.threads", AlterConfigOpType.SET, "100")]),
        _incremental(bootstrap, "1", [("log.retention.ms", AlterConfigOpType.APPEND, "1")]),
        alter_incremental(bootstrap, BROKER, "", [("listeners", SET, "PLAINTEXT://h:1")]),
        alter_incremental(bootstrap, BROKER, "2", [("log.retention.ms", SET, "1")]),
        alter(bootstrap, BROKER, "1", {"log.retention.hours": "3", "num.partitions": "3"}),
        # The legacy API replaces the level's whole set: max.connections goes.
        alter(bootstrap, BROKER, "", {"log.retention.ms": "7200000",
                                      "message.max.bytes": "3000000",
                                      "log.roll.jitter.ms": "6"}),
        alter_incremental(bootstrap, BROKER, "1", [("num.partitions", DELETE, None)]),
    ]


def _described(bootstrap: str, topic: str) -> tuple:
    """What DescribeConfigs answers afterwards: the node through kafka-python's admin, the
    cluster defaults and a topic raw."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="dynamic-configs")
    try:
        node = admin.describe_configs(
            [KPConfigResource(ConfigResourceType.BROKER, "1", BROKER_KEYS)],
            config_filter="all", include_synonyms=True)["broker"]["1"]
    finally:
        admin.close()
    return node, describe(bootstrap, BROKER, ""), describe(bootstrap, TOPIC, topic, TOPIC_KEYS)


def _settled(answer: tuple) -> bool:
    """Kafka applies a change moments after answering it."""
    node, defaults, _topic = answer
    return node.get("log.roll.jitter.ms", {}).get("value") == "6" \
        and node.get("message.max.bytes", {}).get("value") == "2000000" \
        and "max.connections" not in defaults[2]


def test_same_answers_as_kafka_and_kept_across_a_restart(real_kafka, tmp_path):
    topic = f"dyn-{uuid.uuid4().hex[:10]}"
    # serve.sh sets num.partitions in Kafka's server.properties: set it statically here too.
    kafkalite = BrokerProcess(data_dir=str(tmp_path / "data"), settings={"num.partitions": "1"})
    with kafkalite:
        try:
            answers = {}
            for name, bootstrap in (("kafkalite", kafkalite.bootstrap), ("kafka", real_kafka)):
                create_topic(bootstrap, topic)
                changes = _changes(bootstrap)
                described = eventually(lambda: _described(bootstrap, topic), _settled)
                answers[name] = changes, described
        finally:
            for level in ("1", ""):  # the session's Kafka goes back to its static configs
                alter(real_kafka, BROKER, level, {})
        for part in (0, 1):  # the answers to the changes, then the descriptions
            assert answers["kafkalite"][part] == answers["kafka"][part]
        node = answers["kafka"][1][0]
        assert node["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert [s["source"] for s in node["message.max.bytes"]["synonyms"]] == [
            "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG"]
        kafkalite.restart()
        assert _described(kafkalite.bootstrap, topic) == answers["kafkalite"][1]


def _produce(bootstrap: str, topic: str, size: int) -> int:
    batch = build_batch([(b"k", b"v" * size, [], int(time.time() * 1000))])
    with connect(bootstrap) as s:
        return produce_raw(s, topic, 0, batch).error_code


def test_applied_at_once_and_after_a_restart(broker_process):
    bp = broker_process
    topic = f"dyn-{uuid.uuid4().hex[:10]}"
    create_topic(bp.bootstrap, topic)
    assert _produce(bp.bootstrap, topic, 3000) == 0
    # A topic without an override inherits the node's new message.max.bytes at once.
    assert alter_incremental(bp.bootstrap, BROKER, "1",
                             [("message.max.bytes", SET, "2000")]) == (0, None)
    assert _produce(bp.bootstrap, topic, 3000) == MESSAGE_TOO_LARGE
    assert _produce(bp.bootstrap, topic, 500) == 0
    # The cluster-wide default retention reaches it too: the old records go.
    assert alter_incremental(bp.bootstrap, BROKER, "", [("log.retention.ms", SET, "1")]) \
        == (0, None)
    with connect(bp.bootstrap) as s:
        gone = eventually(lambda: fetch_raw(s, topic, 0, 0).error_code, lambda c: c == 1,
                          timeout=20)
    assert gone == 1  # OFFSET_OUT_OF_RANGE: retention moved the log start past them

    bp.restart()
    assert _produce(bp.bootstrap, topic, 3000) == MESSAGE_TOO_LARGE
    _code, _message, configs = describe(bp.bootstrap, TOPIC, topic,
                                        ["max.message.bytes", "retention.ms"])
    assert configs["max.message.bytes"][:3] == ("2000", False, 2)  # DYNAMIC_BROKER_CONFIG
    assert configs["retention.ms"][:3] == ("1", False, 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert alter_incremental(bp.bootstrap, BROKER, "1",
                             [("message.max.bytes", DELETE, None)]) == (0, None)
    assert _produce(bp.bootstrap, topic, 3000) == 0


def test_append_and_validate_only(broker_process):
    bootstrap = broker_process.bootstrap
    assert alter_incremental(bootstrap, BROKER, "1", [("log.cleanup.policy", APPEND, "compact")],
                             validate_only=True) == (0, None)
    assert describe(bootstrap, BROKER, "1", ["log.cleanup.policy"])[2][
        "log.cleanup.policy"][:3] == ("delete", False, 5)
    assert alter_incremental(bootstrap, BROKER, "1", [("listeners", SET, "PLAINTEXT://h:1")]) \
        == (INVALID_REQUEST, "Cannot update these configs dynamically: Set(listeners) "
                             "(kafkalite binds its listener only at startup)")
