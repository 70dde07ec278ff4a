# Error answers, as raw requests (the client modules check how each client surfaces some of
# them). Each expected code is what Apache Kafka 3.8 answers, from its source:
# - KafkaApis.getTopicMetadata: a missing topic without auto-creation is UNKNOWN_TOPIC_OR_PARTITION,
#   or INVALID_TOPIC_EXCEPTION when Topic.validate rejects the name; with auto-creation a KRaft
#   broker forwards the creation and answers UNKNOWN_TOPIC_OR_PARTITION first
#   (AutoTopicCreationManager.sendCreateTopicRequest), a ZooKeeper one LEADER_NOT_AVAILABLE.
# - Produce never creates topics: a missing one is UNKNOWN_TOPIC_OR_PARTITION
#   (ReplicaManager.appendToLocalLog), whatever auto.create.topics.enable says.
# - ReplicationControlManager.createTopic: TOPIC_ALREADY_EXISTS; Topic.validate / collision
#   (`.` vs `_`) -> INVALID_TOPIC_EXCEPTION; replication factor 0 or above the broker count ->
#   INVALID_REPLICATION_FACTOR; 0 partitions -> INVALID_PARTITIONS; -1 means the broker default
#   (KIP-464). createPartitions: not more than now -> INVALID_PARTITIONS.
# - A batch over the topic's max.message.bytes: MESSAGE_TOO_LARGE (LogValidator / UnifiedLog).
# - Fetch past the log end: OFFSET_OUT_OF_RANGE (the client then applies auto.offset.reset).
# - OffsetCommit to a Stable group from an unknown member: UNKNOWN_MEMBER_ID; from the member at a
#   wrong generation: ILLEGAL_GENERATION; a "simple" commit (generation -1, no member) while the
#   group has members: UNKNOWN_MEMBER_ID (GroupCoordinator.handleCommitOffsets 3.x,
#   ClassicGroup.validateOffsetCommit 4.x).
from __future__ import annotations

import time
import uuid

import pytest

from compat_tests.conftest import unique
from compat_tests.protocol_cases import DATA_RECORDS, Ctx, batch, fetch_fields
from compat_tests.protocol_cases_groups import COMMIT_METADATA, find_coordinator, stable_group

UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE, LEADER_NOT_AVAILABLE = 3, 1, 5
MESSAGE_TOO_LARGE, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS = 10, 17, 36
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 37, 38
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 22, 25
BAD_NAMES = ["has space", "..", ".", "x" * 250, "semi;colon", "sl/ash"]


@pytest.fixture(scope="module")
def ctx(target):
    return Ctx(target)


def create(target, name: str, partitions: int = 1, replication: int = 1,
           config: dict | None = None, validate_only: bool = False):
    resp = target.call(19, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": replication,
        "assignments": [], "configs": [{"name": k, "value": v} for k, v in (config or {}).items()]}],
        "timeout_ms": 15000, "validate_only": validate_only})
    if resp.topics[0].error_code == 0 and not validate_only:
        target.created_topics.append(name)
    return resp.topics[0]


def metadata_topic(target, name: str, allow_auto: bool):
    return target.call(3, {"topics": [{"name": name}],
                           "allow_auto_topic_creation": allow_auto}).topics[0]


def produce_one(target, topic: str, value: bytes, topic_id=None):
    fields = Ctx.produce_fields(topic, topic_id or uuid.UUID(int=0),
                                batch([(b"k", value, [])]))
    return target.call(0, fields, min(target.version(0), 12)).responses[0].partition_responses[0]


def test_produce_to_unknown_topic(target):
    part = produce_one(target, unique("nosuch"), b"v")
    assert part.error_code == UNKNOWN_TOPIC_OR_PARTITION, part


def test_metadata_unknown_topic_auto_create_off(target_with):
    t = target_with({"auto.create.topics.enable": "false"})
    name = unique("noauto")
    assert metadata_topic(t, name, allow_auto=True).error_code == UNKNOWN_TOPIC_OR_PARTITION
    time.sleep(0.5)  # an asynchronous creation would show by now on a single node
    assert metadata_topic(t, name, allow_auto=False).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert produce_one(t, name, b"v").error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_auto_creates_when_enabled(target_with):
    t = target_with({"auto.create.topics.enable": "true"})
    name = unique("auto")
    first = metadata_topic(t, name, allow_auto=True)
    assert first.error_code in (0, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE), first
    t.created_topics.append(name)
    expected = int(t.broker_config("num.partitions"))
    t.wait_for_leaders(name, expected)


@pytest.mark.parametrize("name", BAD_NAMES, ids=["space", "dotdot", "dot", "too-long",
                                                 "semicolon", "slash"])
def test_invalid_topic_name(target, name):
    assert create(target, name).error_code == INVALID_TOPIC_EXCEPTION
    assert metadata_topic(target, name, allow_auto=False).error_code == INVALID_TOPIC_EXCEPTION


def test_topic_name_collision_dot_underscore(target):
    base = unique("collide")
    assert create(target, base + ".x").error_code == 0
    assert create(target, base + "_x").error_code == INVALID_TOPIC_EXCEPTION


def test_create_existing_topic(target, topic):
    t = create(target, topic)
    assert t.error_code == TOPIC_ALREADY_EXISTS, t
    assert create(target, topic, validate_only=True).error_code == TOPIC_ALREADY_EXISTS


def test_invalid_replication_factor(target):
    too_many = len(target.node_ids) + 2
    for rf in (too_many, 0):
        name = unique("rf")
        assert create(target, name, replication=rf).error_code == INVALID_REPLICATION_FACTOR
        assert metadata_topic(target, name, False).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_invalid_partition_count(target):
    assert create(target, unique("parts"), partitions=0).error_code == INVALID_PARTITIONS


def test_defaults_for_minus_one(target):
    if target.versions[19][1] < 4:
        pytest.skip("CreateTopics v4+ (KIP-464) needed for -1 defaults")
    t = create(target, unique("defaults"), partitions=-1, replication=-1)
    assert t.error_code == 0, t
    if target.version(19) >= 5:
        assert t.num_partitions == int(target.broker_config("num.partitions"))


def test_create_partitions_errors(target, topic):
    missing = unique("nosuch")
    resp = target.call(37, {"topics": [{"name": topic, "count": 1, "assignments": None},
                                       {"name": missing, "count": 2, "assignments": None}],
                            "timeout_ms": 15000, "validate_only": False})
    # By name: KRaft Kafka answers in the order of a HashSet of the names
    # (ControllerApis.createPartitions), not the request's, so either order is Kafka's.
    codes = {r.name: r.error_code for r in resp.results}
    assert codes == {topic: INVALID_PARTITIONS, missing: UNKNOWN_TOPIC_OR_PARTITION}, resp


def test_message_too_large(target, make_topic):
    topic = make_topic(config={"max.message.bytes": "1000"})
    part = produce_one(target, topic, b"x" * 3000)
    assert part.error_code == MESSAGE_TOO_LARGE, part
    assert produce_one(target, topic, b"x" * 100).error_code == 0


def test_fetch_out_of_range(ctx, target):
    v = target.version(1)
    for offset in (len(DATA_RECORDS) + 100, -5):
        resp = target.call(1, fetch_fields(ctx.data_topic, ctx.data_topic_id, offset, 0), v)
        part = resp.responses[0].partitions[0]
        assert part.error_code == OFFSET_OUT_OF_RANGE, f"offset {offset}: {part}"
        assert part.high_watermark in (-1, len(DATA_RECORDS))


def _commit(target, group: str, topic: str, generation: int, member: str):
    return target.call(8, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
             "committed_metadata": COMMIT_METADATA}]}]}).topics[0].partitions[0].error_code


def test_commit_unknown_member_and_stale_generation(ctx, target):
    g = stable_group(ctx)
    topic = ctx.data_topic
    assert _commit(target, g["group"], topic, g["generation"], "compat-nobody") == \
        UNKNOWN_MEMBER_ID
    assert _commit(target, g["group"], topic, g["generation"] + 1, g["member"]) == \
        ILLEGAL_GENERATION
    assert _commit(target, g["group"], topic, -1, "") == UNKNOWN_MEMBER_ID
    # The real member at the right generation may commit.
    assert _commit(target, g["group"], topic, g["generation"], g["member"]) == 0


def test_describe_missing_topic(target):
    name = unique("nosuch")
    assert metadata_topic(target, name, allow_auto=False).error_code == \
        UNKNOWN_TOPIC_OR_PARTITION
    res = target.call(32, {"resources": [{"resource_type": 2, "resource_name": name,
                                          "configuration_keys": None}]}).results[0]
    assert res.error_code == UNKNOWN_TOPIC_OR_PARTITION, res
    lo = target.call(2, {"replica_id": -1, "topics": [{"name": name, "partitions": [
        {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]})
    assert lo.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    d = target.call(20, {"topic_names": [name], "topics": [{"name": name}], "timeout_ms": 5000})
    assert [r.error_code for r in d.responses] == [UNKNOWN_TOPIC_OR_PARTITION]


def test_clients_producing_to_unknown_topic_auto_create_off(target_with):
    """The broker's UNKNOWN_TOPIC_OR_PARTITION as clients see it: nothing is created, and the
    send fails (kafka-python: metadata wait times out; librdkafka: delivery error)."""
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    t = target_with({"auto.create.topics.enable": "false"})
    name = unique("noauto-client")
    p = KafkaProducer(bootstrap_servers=t.bootstrap, max_block_ms=2000)
    try:
        with pytest.raises(KafkaTimeoutError):
            p.send(name, value=b"v").get(timeout=10)
    finally:
        p.close()
    reports = []
    cp = Producer({"bootstrap.servers": t.bootstrap, "message.timeout.ms": 3000})
    cp.produce(name, value=b"v", on_delivery=lambda err, msg: reports.append(err))
    cp.flush(15)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() in (KafkaError._UNKNOWN_TOPIC, KafkaError._MSG_TIMED_OUT,
                                 KafkaError.UNKNOWN_TOPIC_OR_PART), reports[0]
    assert metadata_topic(t, name, allow_auto=False).error_code == UNKNOWN_TOPIC_OR_PARTITION


# More answers, same sources: LogValidator.validateKey (a compacted topic needs keys:
# INVALID_RECORD); ReplicationControlManager.createTopic through the config validator (an
# unknown config name or a bad value: INVALID_CONFIG, 40); Partition.deleteRecordsOnLeader and
# UnifiedLog.maybeIncrementLogStartOffset (past the high watermark: OFFSET_OUT_OF_RANGE; -1 means
# the high watermark; a compacted topic: POLICY_VIOLATION, 44); KafkaApis.handleOffsetCommitRequest
# (a missing topic: UNKNOWN_TOPIC_OR_PARTITION per partition).
INVALID_RECORD, INVALID_CONFIG, POLICY_VIOLATION = 87, 40, 44


def test_compacted_topic_needs_keys(target, make_topic):
    topic = make_topic(config={"cleanup.policy": "compact"})
    fields = Ctx.produce_fields(topic, uuid.UUID(int=0), batch([(None, b"no key", [])]))
    part = target.call(0, fields, min(target.version(0), 12)).responses[0].partition_responses[0]
    assert part.error_code == INVALID_RECORD, part
    assert produce_one(target, topic, b"keyed").error_code == 0


@pytest.mark.parametrize("config", [{"no.such.config": "1"}, {"retention.ms": "soon"}],
                         ids=["unknown-name", "bad-value"])
def test_create_topic_invalid_config(target, config):
    name = unique("badcfg")
    assert create(target, name, config=config).error_code == INVALID_CONFIG
    assert metadata_topic(target, name, False).error_code == UNKNOWN_TOPIC_OR_PARTITION


def _delete_records(target, topic: str, offset: int):
    r = target.call(21, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": offset}]}], "timeout_ms": 15000})
    return r.topics[0].partitions[0]


def test_delete_records_bounds(target, make_topic):
    topic = make_topic()
    for v in (b"a", b"b", b"c"):
        assert produce_one(target, topic, v).error_code == 0
    assert _delete_records(target, topic, 10).error_code == OFFSET_OUT_OF_RANGE
    p = _delete_records(target, topic, -1)  # -1: up to the high watermark
    assert (p.error_code, p.low_watermark) == (0, 3), p
    compacted = make_topic(config={"cleanup.policy": "compact"})
    assert _delete_records(target, compacted, 0).error_code == POLICY_VIOLATION


def test_commit_for_missing_topic(target):
    group = unique("commit-missing")
    find_coordinator(Ctx(target), group)
    code = _commit(target, group, unique("nosuch"), -1, "")
    assert code == UNKNOWN_TOPIC_OR_PARTITION
