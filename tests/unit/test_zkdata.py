# kafkalite.cluster.zkdata against golden znodes: the bytes a real Kafka 3.8.0 broker in
# ZooKeeper mode wrote (read back from its ZooKeeper), decoded to the values Kafka meant and
# re-encoded to the same bytes. tests/cluster/test_kafka_znodes.py redoes this live.
from __future__ import annotations

import json

import pytest

from kafkalite.cluster import zkdata as z

# Kafka 3.8.0, broker.id=0, listeners=PLAINTEXT://127.0.0.1:27270, topic T with 2 partitions
BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
          b'"endpoints":["PLAINTEXT://127.0.0.1:27270"],"jmx_port":-1,"port":27270,'
          b'"host":"127.0.0.1","version":5,"timestamp":"1795499112183"}')
CONTROLLER = b'{"version":2,"brokerid":0,"timestamp":"1795499112389","kraftControllerEpoch":-1}'
CLUSTER_ID = b'{"version":"1","id":"E-gMBbc7TKW4pMFn77fP6A"}'
TOPIC = (b'{"partitions":{"0":[0],"1":[0]},"topic_id":"6iLAjV1nT9-6pHhdBT-xbA",'
         b'"adding_replicas":{},"removing_replicas":{},"version":3}')
STATE = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
FEATURE = b'{"features":{},"version":2,"status":1}'
PID_BLOCK = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
TOPIC_CONFIG = b'{"version":1,"config":{}}'


def test_broker_registration():
    b = z.BrokerRegistration.decode(0, BROKER)
    assert b.endpoints == (z.Endpoint("PLAINTEXT", "127.0.0.1", 27270),)
    assert dict(b.security_protocols) == {"PLAINTEXT": "PLAINTEXT"}
    assert (b.timestamp_ms, b.rack, b.jmx_port, b.version) == (1795499112183, None, -1, 5)
    assert b.encode() == BROKER


def test_broker_with_several_listeners_and_a_rack():
    b = z.BrokerRegistration(
        3, (z.Endpoint("INTERNAL", "10.0.0.3", 9093), z.Endpoint("PLAINTEXT", "::1", 9092)),
        {"INTERNAL": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"}, 1700000000000, rack="r1")
    d = json.loads(b.encode())
    # the top-level host/port are the first PLAINTEXT endpoint's, for old clients
    assert (d["host"], d["port"], d["rack"]) == ("::1", 9092, "r1")
    assert d["endpoints"] == ["INTERNAL://10.0.0.3:9093", "PLAINTEXT://[::1]:9092"]
    assert z.BrokerRegistration.decode(3, b.encode()) == b


def test_broker_without_plaintext_has_null_host():
    b = z.BrokerRegistration(1, (z.Endpoint("SSL", "h", 9093),), {"SSL": "SSL"}, 1)
    d = json.loads(b.encode())
    assert (d["host"], d["port"]) == (None, -1)


def test_controller():
    c = z.ControllerRegistration.decode(CONTROLLER)
    assert c == z.ControllerRegistration(0, 1795499112389, -1)
    assert c.encode() == CONTROLLER


def test_controller_epoch_is_a_plain_number():
    assert z.encode_controller_epoch(17) == b"17"
    assert z.decode_controller_epoch(b"1") == 1


def test_cluster_id():
    assert z.decode_cluster_id(CLUSTER_ID) == "E-gMBbc7TKW4pMFn77fP6A"
    assert z.encode_cluster_id("E-gMBbc7TKW4pMFn77fP6A") == CLUSTER_ID


def test_topic_assignment():
    t = z.TopicAssignment.decode(TOPIC)
    assert t == z.TopicAssignment({0: (0,), 1: (0,)}, "6iLAjV1nT9-6pHhdBT-xbA")
    assert t.encode() == TOPIC


def test_topic_assignment_in_reassignment():
    t = z.TopicAssignment({0: (1, 2, 3)}, None, adding={0: (3,)}, removing={0: (1,)})
    d = json.loads(t.encode())
    assert d == {"version": 3, "partitions": {"0": [1, 2, 3]}, "adding_replicas": {"0": [3]},
                 "removing_replicas": {"0": [1]}}
    assert z.TopicAssignment.decode(t.encode()) == t


def test_partition_state():
    s = z.PartitionState.decode(STATE)
    assert s == z.PartitionState(leader=0, leader_epoch=0, isr=(0,), controller_epoch=1)
    assert s.encode() == STATE


def test_partition_state_recovering_and_offline():
    s = z.PartitionState(z.LEADER_NONE, 4, (), 2, z.RECOVERING)
    assert json.loads(s.encode())["leader_recovery_state"] == 1
    assert z.PartitionState.decode(s.encode()) == s


def test_feature_and_producer_id_block_and_topic_config():
    assert z.FeatureNode.decode(FEATURE) == z.FeatureNode({}, 1, 2)
    assert z.FeatureNode({}).encode() == FEATURE
    block = z.ProducerIdBlock.decode(PID_BLOCK)
    assert (block.broker, block.block_start, block.block_end, block.size) == (0, 0, 999, 1000)
    assert block.encode() == PID_BLOCK
    assert z.encode_topic_config({}) == TOPIC_CONFIG
    assert z.decode_topic_config(b'{"version":1,"config":{"retention.ms":"1000"}}') == {
        "retention.ms": "1000"}
    assert z.decode_topic_config(None) == {}


def test_notifications():
    assert z.encode_config_change("topics/T") == b'{"version":2,"entity_path":"topics/T"}'
    assert z.decode_config_change(z.encode_config_change("topics/T")) == "topics/T"
    parts = {("T", 0), ("U", 3)}
    assert z.decode_isr_change(z.encode_isr_change(sorted(parts))) == parts
    assert json.loads(z.encode_isr_change([("T", 0)])) == {
        "version": 1, "partitions": [{"topic": "T", "partition": 0}]}
    assert z.decode_preferred_replica_election(
        z.encode_preferred_replica_election(sorted(parts))) == parts


def test_java_string_hash():
    # java.lang.String.hashCode values (signed 32-bit, over UTF-16 code units)
    assert z._java_hash("hello") == 99162322
    assert z._java_hash("version") == 351608024
    assert z._java_hash("") == 0
    assert z._java_hash("\U0001F600") == 31 * 0xD83D + 0xDE00


def test_control_characters_escape_as_jackson_does():
    assert z.encode_topic_config({"k": "a\x01b"}) == b'{"version":1,"config":{"k":"a\\u0001b"}}'
    assert z.encode_topic_config({"k": "\x1f"}).endswith(b'"\\u001F"}}')


@pytest.mark.parametrize("text", ["PLAINTEXT://h:1", "SSL://[::1]:9093", "X://10.0.0.1:-1"])
def test_endpoint_round_trip(text):
    assert z.Endpoint.parse(text).connection_string() == text
