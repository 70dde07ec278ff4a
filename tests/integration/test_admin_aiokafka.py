"""Admin APIs through aiokafka's AIOKafkaAdminClient, unmodified."""
from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import OffsetOutOfRangeError


@pytest.fixture
async def admin(kafka_broker):
    client = AIOKafkaAdminClient(bootstrap_servers=kafka_broker, request_timeout_ms=15000)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def _name() -> str:
    return f"aio-{uuid.uuid4().hex[:10]}"


def _topic_errors(resp) -> dict:
    return {t[0]: t[1] for t in resp.topic_errors}


async def test_create_describe_alter_delete(admin):
    name, dry = _name(), _name()
    resp = await admin.create_topics([NewTopic(name, 2, 1, topic_configs={"segment.ms": "600000"}),
                                      NewTopic("bad topic", 1, 1), NewTopic(_name(), 1, 5)])
    codes = sorted(_topic_errors(resp).values())
    assert codes == [0, 17, 38]
    resp = await admin.create_topics([NewTopic(dry, 1, 1)], validate_only=True)
    assert _topic_errors(resp) == {dry: 0}
    assert _topic_errors(await admin.create_topics([NewTopic(name, 1, 1)])) == {name: 36}
    topics = await admin.list_topics()
    assert name in topics and dry not in topics
    (desc,) = await admin.describe_topics([name])
    assert len(desc["partitions"]) == 2

    (resp,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    (result,) = resp.resources
    assert result[0] == 0
    configs = {c[0]: c for c in result[4]}
    assert len(configs) >= 25
    assert configs["segment.ms"][1] == "600000"

    res = ConfigResource(ConfigResourceType.TOPIC, name, {"retention.bytes": "99999999"})
    (resp,) = [r for r in await admin.alter_configs([res]) if r.resources]
    assert resp.resources[0][0] == 0
    (resp,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                           {"retention.bytes": None})])
    ((_, value, *_),) = resp.resources[0][4]
    assert value == "99999999"

    await admin.create_partitions({name: NewPartitions(3)})
    (desc,) = await admin.describe_topics([name])
    assert len(desc["partitions"]) == 3

    assert _topic_errors_of_delete(await admin.delete_topics([name])) == {name: 0}
    assert name not in await admin.list_topics()


def _topic_errors_of_delete(resp) -> dict:
    return {t[0]: t[1] for t in resp.topic_error_codes}


async def test_describe_cluster_and_delete_records(admin, kafka_broker, kafka_topic):
    cluster = await admin.describe_cluster()
    assert cluster["controller_id"] == 1 and cluster["cluster_id"]

    name = kafka_topic()
    tp = TopicPartition(name, 0)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker)
    await producer.start()
    try:
        for i in range(6):
            await producer.send_and_wait(name, b"x%d" % i, partition=0)
    finally:
        await producer.stop()
    assert await admin.delete_records({tp: RecordsToDelete(3)}) == {tp: 3}
    with pytest.raises(OffsetOutOfRangeError):
        await admin.delete_records({tp: RecordsToDelete(7)})

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        assert (await consumer.beginning_offsets([tp]))[tp] == 3
        await consumer.seek_to_beginning(tp)
        batch = await consumer.getmany(tp, timeout_ms=10000, max_records=3)
        assert [m.offset for m in batch[tp]] == [3, 4, 5]
    finally:
        await consumer.stop()
