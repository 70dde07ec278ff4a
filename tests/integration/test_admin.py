"""Admin APIs through kafka-python's KafkaAdminClient (unmodified), plus raw requests encoded
with kafka-python's independent codec for what no admin client exposes."""
from __future__ import annotations

import socket
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient,
                         NewPartitions)
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

TOPIC, BROKER, LOGGER = ConfigResourceType.TOPIC, ConfigResourceType.BROKER, \
    ConfigResourceType.BROKER_LOGGER


@pytest.fixture
def admin(kafka_broker):
    client = KafkaAdminClient(bootstrap_servers=kafka_broker, client_id="test-admin")
    try:
        yield client
    finally:
        client.close()


def _name() -> str:
    return f"adm-{uuid.uuid4().hex[:10]}"


def _create(admin, spec: dict, **kw) -> dict:
    """{name: result dict} of a CreateTopics request, errors returned rather than raised."""
    res = admin.create_topics(spec, raise_errors=False, **kw)
    return {t["name"]: t for t in res["topics"]}


def _topic_configs(admin, name: str, synonyms: bool = False) -> dict:
    res = admin.describe_configs([ConfigResource(TOPIC, name)], include_synonyms=synonyms,
                                 config_filter="all")
    return res["topic"][name]


def _raw(bootstrap: str, request, version: int, response_cls):
    """One request/response over a fresh socket, both ends in kafka-python's codec."""
    request.API_VERSION = version
    request.with_header(correlation_id=11, client_id="raw-test")
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request.encode(version=version, header=True, framed=True))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
            chunk = s.recv(65536)
            assert chunk, "broker closed the connection"
            buf += chunk
    return response_cls.decode(buf[4:], version=version, header=True)


def _produce(bootstrap: str, topic: str, n: int, **kw) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **kw)
    try:
        for i in range(n):
            producer.send(topic, value=b"v%d" % i, partition=0)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)


# --- CreateTopics ----------------------------------------------------------------------------

def test_create_topics_results_and_errors(admin):
    name, dry, manual = _name(), _name(), _name()
    res = _create(admin, {name: {"num_partitions": 3, "replication_factor": 1,
                                 "configs": {"retention.ms": "3600000"}}})[name]
    assert res["error_code"] == 0 and res["error_message"] is None
    assert res["num_partitions"] == 3 and res["replication_factor"] == 1
    assert res["topic_id"] not in (None, str(uuid.UUID(int=0)))
    assert len(res["configs"]) >= 25
    assert res["configs"]["retention.ms"]["value"] == "3600000"
    assert res["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert res["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

    assert _create(admin, {dry: {"num_partitions": 2}}, validate_only=True)[dry]["error_code"] == 0
    assert dry not in admin.list_topics()
    assert name in admin.list_topics()

    again = _create(admin, {name: {"num_partitions": 1}})[name]
    assert again["error_code"] == 36 and again["error_message"] == f"Topic '{name}' already exists."
    assert _create(admin, {"bad name!": {}})["bad name!"]["error_code"] == 17
    assert _create(admin, {"a" * 250: {}})["a" * 250]["error_code"] == 17
    rf = _create(admin, {_name(): {"num_partitions": 1, "replication_factor": 3}})
    (rf,) = rf.values()
    assert rf["error_code"] == 38 and "only 1 broker(s) are registered" in rf["error_message"]
    (zero,) = _create(admin, {_name(): {"num_partitions": 0}}).values()
    assert zero["error_code"] == 37
    (bad,) = _create(admin, {_name(): {"configs": {"retention.ms": "soon"}}}).values()
    assert bad["error_code"] == 40
    (unknown,) = _create(admin, {_name(): {"configs": {"no.such.config": "1"}}}).values()
    assert unknown["error_code"] == 40 and "no.such.config" in unknown["error_message"]
    (tiered,) = _create(admin, {_name(): {"configs": {"remote.storage.enable": "true"}}}).values()
    assert tiered["error_code"] == 40  # no tiered storage here

    defaults = _name()  # -1/-1: num.partitions and default.replication.factor
    assert _create(admin, {defaults: {}})[defaults]["num_partitions"] == 1
    assert _create(admin, {manual: {"assignments": {0: [1], 1: [1]}}})[manual]["error_code"] == 0
    (elsewhere,) = _create(admin, {_name(): {"assignments": {0: [2]}}}).values()
    assert elsewhere["error_code"] == 39
    (desc,) = [t for t in admin.describe_topics([name, manual]) if t["name"] == manual]
    assert [p["partition_index"] for p in desc["partitions"]] == [0, 1]
    assert all(p["replica_nodes"] == [1] for p in desc["partitions"])


# --- DescribeConfigs ---------------------------------------------------------------------------

def test_describe_topic_and_broker_configs(admin, kafka_topic):
    name = kafka_topic(config={"cleanup.policy": "compact", "max.message.bytes": "2000000"})
    configs = _topic_configs(admin, name, synonyms=True)
    assert len(configs) >= 25
    policy = configs["cleanup.policy"]
    assert policy["value"] == "compact" and policy["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert policy["read_only"] is False and policy["is_sensitive"] is False
    assert policy["config_type"] == "LIST"
    assert [(s["name"], s["source"]) for s in policy["synonyms"]] == [
        ("cleanup.policy", "DYNAMIC_TOPIC_CONFIG"), ("log.cleanup.policy", "DEFAULT_CONFIG")]
    assert configs["max.message.bytes"]["synonyms"][1] == {
        "name": "message.max.bytes", "value": "1048588", "source": "DEFAULT_CONFIG"}
    assert configs["retention.ms"]["value"] == "604800000"
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    # The default filter keeps only modified configs, as against Kafka.
    modified = admin.describe_configs([ConfigResource(TOPIC, name)])["topic"][name]
    assert set(modified) == {"cleanup.policy", "max.message.bytes"}
    only = admin.describe_configs([ConfigResource(TOPIC, name, ["segment.ms"])],
                                  config_filter="all")["topic"][name]
    assert set(only) == {"segment.ms"}

    broker = admin.describe_configs([ConfigResource(BROKER, "1")],
                                    config_filter="all")["broker"]["1"]
    assert len(broker) >= 50
    # The fixture sets log.retention.check.interval.ms on the command line.
    assert broker["log.retention.check.interval.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    # read_only as Kafka 3.8 answers: num.partitions is static there, message.max.bytes dynamic.
    assert broker["num.partitions"]["read_only"] is True
    assert broker["message.max.bytes"]["read_only"] is False
    assert broker["log.dirs"]["read_only"] is True


def test_describe_configs_documentation_and_errors_raw(kafka_broker, kafka_topic):
    name = kafka_topic()
    Res = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest(resources=[
        Res(resource_type=2, resource_name=name, configuration_keys=["segment.bytes"]),
        Res(resource_type=2, resource_name="no-such-topic-here", configuration_keys=None),
        Res(resource_type=4, resource_name="7", configuration_keys=None),
        Res(resource_type=4, resource_name="", configuration_keys=None),
        Res(resource_type=8, resource_name="1", configuration_keys=["root"]),
    ], include_synonyms=True, include_documentation=True)
    resp = _raw(kafka_broker, req, 4, DescribeConfigsResponse)
    topic, missing, wrong_id, defaults, logger = resp.results
    (seg,) = topic.configs
    assert (topic.error_code, seg.name, seg.config_type) == (0, "segment.bytes", 3)
    assert seg.documentation and seg.config_source == 5
    assert missing.error_code == 3 and missing.configs == []
    assert wrong_id.error_code == 42 and "expected 1" in wrong_id.error_message
    assert defaults.error_code == 0 and defaults.configs == []
    assert logger.error_code == 0 and logger.configs[0].config_source == 6


# --- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------------

def test_alter_and_incremental_alter_topic_configs(admin, kafka_topic):
    name = kafka_topic()
    res = admin.alter_configs([ConfigResource(TOPIC, name, {"retention.ms": "123456",
                                                            "segment.ms": "7200000"})],
                              incremental=False)
    assert res == {"topic": {name: "OK"}}
    configs = _topic_configs(admin, name)
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.ms"]["value"] == "7200000"

    ops = {"retention.bytes": (AlterConfigOp.SET, "1048576"),
           "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
           "segment.ms": (AlterConfigOp.DELETE, None)}
    assert admin.alter_configs([ConfigResource(TOPIC, name, ops)], incremental=True) == \
        {"topic": {name: "OK"}}
    configs = _topic_configs(admin, name)
    assert configs["retention.bytes"]["value"] == "1048576"
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    assert configs["segment.ms"]["config_source"] == "DEFAULT_CONFIG"
    admin.alter_configs([ConfigResource(TOPIC, name, {
        "cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")})], incremental=True)
    assert _topic_configs(admin, name)["cleanup.policy"]["value"] == "compact"

    # validate_only changes nothing; errors come back per resource.
    admin.alter_configs([ConfigResource(TOPIC, name, {"retention.bytes": "5"})],
                        validate_only=True, incremental=True)
    assert _topic_configs(admin, name)["retention.bytes"]["value"] == "1048576"
    res = admin.alter_configs([ConfigResource(TOPIC, name, {
        "retention.ms": (AlterConfigOp.APPEND, "5")})], incremental=True)
    assert "InvalidConfigurationError" in res["topic"][name] and "not LIST" in res["topic"][name]
    res = admin.alter_configs([ConfigResource(TOPIC, name, {"segment.bytes": "-3"})],
                              incremental=True)
    assert "InvalidConfigurationError" in res["topic"][name]
    res = admin.alter_configs([ConfigResource(TOPIC, name, {"bogus.key": "1"})],
                              incremental=True, raise_on_unknown=False)
    assert "InvalidConfigurationError" in res["topic"][name]
    # num.partitions is not dynamic (kafka-python refuses it client-side unless told not to).
    res = admin.alter_configs([ConfigResource(BROKER, "1", {"num.partitions": "4"})],
                              incremental=True, raise_on_unknown=False)
    assert "InvalidRequestError" in res["broker"]["1"] and "dynamically" in res["broker"]["1"]


def test_broker_logger_levels(admin):
    logger = ConfigResource(LOGGER, "1")
    levels = admin.describe_configs([logger], config_filter="all")["broker_logger"]["1"]
    assert levels["root"]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    assert "kafkalite.broker" in levels
    try:
        res = admin.alter_configs([ConfigResource(LOGGER, "1", {"kafkalite.broker": "DEBUG"})],
                                  incremental=True)
        assert res == {"broker_logger": {"1": "OK"}}
        levels = admin.describe_configs([logger], config_filter="all")["broker_logger"]["1"]
        assert levels["kafkalite.broker"]["value"] == "DEBUG"
        res = admin.alter_configs([ConfigResource(LOGGER, "1", {"kafkalite.broker": "LOUD"})],
                                  incremental=True)
        assert "InvalidConfigurationError" in res["broker_logger"]["1"]
    finally:
        admin.alter_configs([ConfigResource(LOGGER, "1", {
            "kafkalite.broker": (AlterConfigOp.DELETE, None)})], incremental=True)
    levels = admin.describe_configs([logger], config_filter="all")["broker_logger"]["1"]
    assert levels["kafkalite.broker"]["value"] == levels["root"]["value"]


# --- CreatePartitions, DeleteTopics, DescribeCluster ------------------------------------------

def test_create_partitions(admin, kafka_topic):
    name = kafka_topic(partitions=2)

    def codes(spec, **kw):
        r = admin.create_partitions(spec, raise_errors=False, **kw)
        return [(x.error_code, x.error_message) for x in r.results]

    assert codes({name: NewPartitions(3)}, validate_only=True) == [(0, None)]
    assert len(admin.describe_topics([name])[0]["partitions"]) == 2
    assert codes({name: NewPartitions(4)}) == [(0, None)]
    assert len(admin.describe_topics([name])[0]["partitions"]) == 4
    assert codes({name: NewPartitions(4)}) == [(37, "Topic already has 4 partition(s).")]
    assert codes({name: NewPartitions(2)})[0][0] == 37
    assert codes({name: NewPartitions(6, [[1]])})[0][0] == 39
    assert codes({"no-such-topic-x": NewPartitions(2)})[0][0] == 3
    assert codes({name: NewPartitions(6, [[1], [1]])}) == [(0, None)]
    _produce(admin.config["bootstrap_servers"], name, 1)


def test_delete_topics(admin, kafka_topic):
    a, b = kafka_topic(), kafka_topic()
    res = admin.delete_topics([a, b, "never-existed-topic"], raise_errors=False)
    codes = {t["name"]: t["error_code"] for t in res["topics"]}
    assert codes == {a: 0, b: 0, "never-existed-topic": 3}
    assert not {a, b} & set(admin.list_topics())
    assert {t["error_code"] for t in admin.describe_topics([a])} == {3}


def test_describe_cluster(admin, kafka_broker):
    info = admin.describe_cluster()
    assert info["controller_id"] == 1 and info["cluster_id"]
    assert [(b["broker_id"], b["port"]) for b in info["brokers"]] == \
        [(1, int(kafka_broker.rsplit(":", 1)[1]))]
    assert "DESCRIBE_CONFIGS" in info["authorized_operations"]


# --- DeleteRecords, OffsetForLeaderEpoch, DescribeProducers -----------------------------------

def test_delete_records_then_consume(admin, kafka_broker, kafka_topic):
    name = kafka_topic()
    tp = TopicPartition(name, 0)
    _produce(kafka_broker, name, 10)
    assert admin.delete_records({tp: 4})[tp]["low_watermark"] == 4
    assert admin.delete_records({tp: 2})[tp]["low_watermark"] == 4  # never moves back
    with pytest.raises(Exception, match="OffsetOutOfRange"):
        admin.delete_records({tp: 11})
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp])[tp] == 4
        consumer.seek_to_beginning(tp)
        got = []
        for msg in consumer:
            got.append(msg.offset)
            if len(got) == 6:
                break
        assert got == [4, 5, 6, 7, 8, 9]
    finally:
        consumer.close()
    assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 10


def test_offset_for_leader_epoch_raw(kafka_broker, kafka_topic):
    name = kafka_topic()
    _produce(kafka_broker, name, 3)
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Part = Topic.OffsetForLeaderPartition
    for version in (2, 4):
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            Topic(topic=name, partitions=[
                Part(partition=0, current_leader_epoch=-1, leader_epoch=0),
                Part(partition=0, current_leader_epoch=0, leader_epoch=5),
                Part(partition=0, current_leader_epoch=3, leader_epoch=0),
                Part(partition=9, current_leader_epoch=-1, leader_epoch=0)])])
        resp = _raw(kafka_broker, req, version, OffsetForLeaderEpochResponse)
        got = [(p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions]
        assert got == [(0, 0, 3), (0, -1, -1), (75, -1, -1), (3, -1, -1)]


def test_describe_producers(admin, kafka_broker, kafka_topic):
    name = kafka_topic()
    _produce(kafka_broker, name, 5, enable_idempotence=True, linger_ms=0)
    tp = TopicPartition(name, 0)
    state = admin.describe_producers([tp])[tp]
    (producer,) = state.active_producers
    assert producer.producer_id >= 0 and producer.last_sequence >= 0
    assert producer.last_timestamp > 0


def test_raw_delete_by_id_duplicates_and_endpoint_types(kafka_broker, admin, kafka_topic):
    from kafka.protocol.admin import (CreateTopicsRequest, CreateTopicsResponse,
                                      DeleteTopicsRequest, DeleteTopicsResponse,
                                      DescribeClusterRequest, DescribeClusterResponse)
    name = kafka_topic()
    (meta,) = admin.describe_topics([name])
    tid = uuid.UUID(str(meta["topic_id"]))
    State = DeleteTopicsRequest.DeleteTopicState
    req = DeleteTopicsRequest(topics=[State(name=None, topic_id=tid),
                                      State(name=None, topic_id=uuid.uuid4()),
                                      State(name=None, topic_id=uuid.UUID(int=0))],
                              timeout_ms=5000)
    resp = _raw(kafka_broker, req, 6, DeleteTopicsResponse)
    got = {(r.name, r.error_code) for r in resp.responses}
    assert got == {(name, 0), (None, 100), (None, 42)}
    assert name not in admin.list_topics()

    Topic = CreateTopicsRequest.CreatableTopic
    dup = _name()
    req = CreateTopicsRequest(topics=[Topic(name=dup, num_partitions=1, replication_factor=1,
                                            assignments=[], configs=[])] * 2,
                              timeout_ms=5000, validate_only=False)
    resp = _raw(kafka_broker, req, 7, CreateTopicsResponse)
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == \
        [(dup, 42, "Duplicate topic name.")]

    for version, endpoint, code in ((1, 1, 0), (1, 2, 114), (1, 9, 115), (0, 1, 0)):
        req = DescribeClusterRequest(include_cluster_authorized_operations=False,
                                     endpoint_type=endpoint)
        resp = _raw(kafka_broker, req, version, DescribeClusterResponse)
        assert resp.error_code == code
        if code == 0:
            assert resp.authorized_operations is None  # Int.MIN: not requested
            assert [b.broker_id for b in resp.brokers] == [1]


def test_altered_config_applies_to_live_partitions(admin, kafka_broker, kafka_topic):
    from kafka.errors import MessageSizeTooLargeError
    name = kafka_topic()
    admin.alter_configs([ConfigResource(TOPIC, name, {"max.message.bytes": "1000"})],
                        incremental=True)
    producer = KafkaProducer(bootstrap_servers=kafka_broker, retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(name, b"x" * 5000, partition=0).get(timeout=15)
        assert producer.send(name, b"small", partition=0).get(timeout=15).offset == 0
    finally:
        producer.close(timeout=5)
