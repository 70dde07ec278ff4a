# The znodes a real Apache Kafka 3.8.0 broker in ZooKeeper mode writes, read back from its
# ZooKeeper (a chroot of its own on the session server): kafkalite.cluster.zkdata decodes each
# to what Kafka meant, and encodes those values back to Kafka's very bytes (the timestamps
# taken from Kafka's own payloads).
from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from kafkalite.cluster import zkdata
from kafkalite.cluster.zk import ZkClient
from tests.helpers import real_kafka, zookeeper as zkh

TOPIC = "znodes"
PARTITIONS = 20  # more than 12: Kafka's partitions map is a grown Scala hash map


@pytest.fixture(scope="module")
def kafka_on_zookeeper(zookeeper):
    if (reason := real_kafka.unavailable_reason()) is not None:
        pytest.skip(reason)
    chroot = f"/kafka-ref-{uuid.uuid4().hex}"
    kafka = zkh.ZkModeKafka(zookeeper + chroot, broker_id=0, settings={"broker.rack": "r1"})
    try:
        kafka.start()
        env = {**os.environ, "LOG_DIR": os.path.join(kafka.data_dir, "applogs"),
               "KAFKA_HEAP_OPTS": "-Xmx128M"}
        tool = os.path.join(os.path.dirname(kafka.serve), "bin", "kafka-topics.sh")
        r = subprocess.run([tool, "--bootstrap-server", kafka.bootstrap, "--create", "--topic",
                            TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "1",
                            "--config", "retention.ms=123456", "--config",
                            "cleanup.policy=compact"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        from kafka import KafkaProducer  # an idempotent producer: a producer-id block
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, enable_idempotence=True,
                                 acks="all")
        producer.send(TOPIC, b"v", key=b"k").get(60)
        producer.close(10)
        yield kafka, zookeeper + chroot
    finally:
        kafka.cleanup()


@pytest.fixture
async def znodes(kafka_on_zookeeper):
    """read(path) -> (bytes, Stat) from Kafka's chroot."""
    kafka, connect = kafka_on_zookeeper
    client = ZkClient(connect, 6000)
    await client.start()
    yield client
    await client.close()


async def test_broker_registration(znodes):
    data, st = await znodes.get(zkdata.broker_path(0))
    assert st.ephemeral_owner != 0
    broker = zkdata.BrokerRegistration.decode(0, data)
    assert (broker.rack, broker.version, broker.jmx_port) == ("r1", 5, -1)
    assert broker.plaintext().host == "127.0.0.1"
    assert broker.encode() == data


async def test_controller_and_its_epoch(znodes):
    data, st = await znodes.get(zkdata.CONTROLLER)
    controller = zkdata.ControllerRegistration.decode(data)
    assert controller.broker_id == 0 and st.ephemeral_owner != 0
    assert controller.encode() == data
    edata, est = await znodes.get(zkdata.CONTROLLER_EPOCH)
    # created at the initial epoch (0, version 0), then bumped once by the election
    assert zkdata.decode_controller_epoch(edata) == est.version == 1
    assert zkdata.encode_controller_epoch(1) == edata


async def test_topic_assignment_and_partition_states(znodes):
    data, _ = await znodes.get(zkdata.topic_path(TOPIC))
    topic = zkdata.TopicAssignment.decode(data)
    assert topic.partitions == {p: (0,) for p in range(PARTITIONS)}
    assert topic.topic_id and not topic.adding and not topic.removing
    assert topic.encode() == data
    for p in (0, PARTITIONS - 1):
        data, st = await znodes.get(zkdata.partition_state_path(TOPIC, p))
        state = zkdata.PartitionState.decode(data)
        assert (state.leader, state.isr, state.controller_epoch) == (0, (0,), 1)
        assert st.version == 0  # the partition epoch of a new partition
        assert state.encode() == data


async def test_cluster_id_and_producer_id_block(znodes):
    data, _ = await znodes.get(zkdata.CLUSTER_ID)
    cluster_id = zkdata.decode_cluster_id(data)
    assert len(cluster_id) == 22
    assert zkdata.encode_cluster_id(cluster_id) == data
    data, _ = await znodes.get(zkdata.PRODUCER_ID_BLOCK)
    block = zkdata.ProducerIdBlock.decode(data)
    assert (block.broker, block.block_start, block.size) == (0, 0, 1000)
    assert block.encode() == data


async def test_topic_config_features_and_persistent_paths(znodes):
    data, _ = await znodes.get(zkdata.topic_config_path(TOPIC))
    config = zkdata.decode_topic_config(data)
    assert config == {"retention.ms": "123456", "cleanup.policy": "compact"}
    assert json.loads(zkdata.encode_topic_config(config)) == json.loads(data)
    data, _ = await znodes.get(zkdata.FEATURE)
    assert zkdata.FeatureNode.decode(data).encode() == data
    for path in zkdata.PERSISTENT_PATHS:
        assert await znodes.exists(path) is not None, path
