"""Admin APIs through confluent-kafka's AdminClient (librdkafka), unmodified."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer, TopicCollection,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, ResourceType)

TIMEOUT = 15


@pytest.fixture
def admin(kafka_broker):
    return AdminClient({"bootstrap.servers": kafka_broker, "socket.timeout.ms": 10000})


def _name() -> str:
    return f"cfl-{uuid.uuid4().hex[:10]}"


def _error(future) -> KafkaError | None:
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as e:
        return e.args[0]
    return None


def _describe(admin, rtype, name) -> dict:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)


def test_create_list_describe_delete(admin):
    name, dry = _name(), _name()
    fs = admin.create_topics([NewTopic(name, 3, 1, config={"retention.ms": "60000"})],
                             request_timeout=TIMEOUT)
    assert _error(fs[name]) is None
    fs = admin.create_topics([NewTopic(dry, 2, 1)], validate_only=True)
    assert _error(fs[dry]) is None
    # A named listing: librdkafka's all-topics Metadata v12 carries 3 trailing bytes that
    # kafkalite's decoder refuses (reported separately).
    assert len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 3
    err = _error(admin.describe_topics(TopicCollection([dry]))[dry])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    err = _error(admin.create_topics([NewTopic(name, 1, 1)])[name])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS
    err = _error(admin.create_topics([NewTopic("no/slashes", 1, 1)])["no/slashes"])
    assert err.code() == KafkaError.TOPIC_EXCEPTION
    bad = _name()
    err = _error(admin.create_topics([NewTopic(bad, 1, 2)])[bad])
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR
    err = _error(admin.create_topics([NewTopic(bad, 1, 1, config={"cleanup.policy": "x"})])[bad])
    assert err.code() == KafkaError.INVALID_CONFIG

    (desc,) = admin.describe_topics(TopicCollection([name]))[name].result(timeout=TIMEOUT),
    assert desc.name == name and len(desc.partitions) == 3
    assert all(p.leader.id == 1 for p in desc.partitions)

    assert _error(admin.delete_topics([name], operation_timeout=TIMEOUT)[name]) is None
    err = _error(admin.describe_topics(TopicCollection([name]))[name])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    err = _error(admin.delete_topics([name])[name])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_and_alter_configs(admin, kafka_topic):
    name = kafka_topic(config={"retention.ms": "86400000"})
    configs = _describe(admin, ResourceType.TOPIC, name)
    assert len(configs) >= 25
    retention = configs["retention.ms"]
    assert retention.value == "86400000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert [s.name for s in configs["segment.bytes"].synonyms.values()] == ["log.segment.bytes"]

    # Legacy AlterConfigs: the given set replaces every override.
    res = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "3600000"})
    with pytest.warns(DeprecationWarning):
        fs = admin.alter_configs([res])
    assert _error(fs[res]) is None
    configs = _describe(admin, ResourceType.TOPIC, name)
    assert configs["segment.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    assert _error(admin.incremental_alter_configs([res])[res]) is None
    configs = _describe(admin, ResourceType.TOPIC, name)
    assert configs["retention.ms"].value == "1000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"

    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("max.message.bytes", "-5", incremental_operation=AlterConfigOpType.SET)])
    assert _error(admin.incremental_alter_configs([res])[res]).code() == KafkaError.INVALID_CONFIG
    res = ConfigResource(ResourceType.TOPIC, "absent-topic-zz", incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)])
    assert _error(admin.incremental_alter_configs([res])[res]).code() == \
        KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_errors_and_broker(admin):
    res = ConfigResource(ResourceType.TOPIC, "absent-topic-yy")
    err = _error(admin.describe_configs([res])[res])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    broker = _describe(admin, ResourceType.BROKER, "1")
    assert broker["node.id"].value == "1"
    assert broker["log.retention.check.interval.ms"].source == \
        ConfigSource.STATIC_BROKER_CONFIG.value
    res = ConfigResource(ResourceType.BROKER, "1", set_config={"num.partitions": "3"})
    with pytest.warns(DeprecationWarning):
        fs = admin.alter_configs([res])
    err = _error(fs[res])
    assert err.code() == KafkaError.INVALID_REQUEST


def test_create_partitions_and_describe_cluster(admin, kafka_broker, kafka_topic):
    name = kafka_topic(partitions=1)
    fs = admin.create_partitions([NewPartitions(name, 3)], validate_only=True)
    assert _error(fs[name]) is None
    assert len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 1
    assert _error(admin.create_partitions([NewPartitions(name, 3)])[name]) is None
    assert len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 3
    err = _error(admin.create_partitions([NewPartitions(name, 2)])[name])
    assert err.code() == KafkaError.INVALID_PARTITIONS

    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert cluster.controller.id == 1 and cluster.cluster_id
    assert [(n.id, n.port) for n in cluster.nodes] == [(1, int(kafka_broker.rsplit(":", 1)[1]))]


def test_delete_records_then_consume(admin, kafka_broker, kafka_topic):
    name = kafka_topic()
    producer = Producer({"bootstrap.servers": kafka_broker})
    for i in range(8):
        producer.produce(name, value=b"m%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0
    fs = admin.delete_records([TopicPartition(name, 0, 5)])
    (f,) = fs.values()
    assert f.result(timeout=TIMEOUT).low_watermark == 5
    (f,) = admin.delete_records([TopicPartition(name, 0, 100)]).values()
    assert _error(f).code() == KafkaError.OFFSET_OUT_OF_RANGE

    consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": _name(),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT)
        assert (lo, hi) == (5, 8)
        consumer.assign([TopicPartition(name, 0, -2)])  # OFFSET_BEGINNING
        got = []
        for _ in range(50):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.offset())
            if len(got) == 3:
                break
        assert got == [5, 6, 7]
    finally:
        consumer.close()
