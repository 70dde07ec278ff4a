# Client matrix: kafka-python (version in COMPATIBILITY.md). Produce/consume, codecs,
# idempotence, groups, seek/assign/pause/resume, auto.offset.reset, offsets for times, admin,
# and how the client surfaces broker errors. kafka-python refuses a record whose key and value
# are both null ("Need at least one: key or value"), so that sample is left out here.
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from compat_tests.clients_common import (BIG_TOPIC_CONFIG, CODECS, COMPRESSIBLE,
                                         CONSUMER_TIMEOUTS, ONE_MB,
                                         SAMPLES, IDEMPOTENT_RECORDS, assert_idempotent_batches,
                                         assert_stored_codec, big_value,
                                         norm_headers, wait_for)
from compat_tests.conftest import unique

SAMPLES_KP = [s for s in SAMPLES if s[0] is not None or s[1] is not None]


def producer(bootstrap, **kw) -> KafkaProducer:
    kw.setdefault("acks", "all")
    return KafkaProducer(bootstrap_servers=bootstrap, client_id="compat-kafka-python",
                         request_timeout_ms=15000, max_block_ms=15000, **kw)


def consumer(bootstrap, **kw) -> KafkaConsumer:
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    return KafkaConsumer(bootstrap_servers=bootstrap, client_id="compat-kafka-python",
                         **CONSUMER_TIMEOUTS, **kw)


@pytest.fixture
def admin(bootstrap):
    a = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-kafka-python",
                         request_timeout_ms=15000)
    yield a
    a.close()


def poll_n(c: KafkaConsumer, n: int, timeout: float = 20.0) -> list:
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=200).values():
            out.extend(recs)
    assert len(out) >= n, f"got {len(out)} of {n} records"
    return out


def produce_all(p: KafkaProducer, topic: str, samples, partition: int | None = 0) -> list:
    futs = [p.send(topic, key=k, value=v, headers=h, partition=partition) for k, v, h in samples]
    p.flush(15)
    return [f.get(timeout=15) for f in futs]


def read_all(bootstrap, topic: str, n: int, partition: int = 0, **kw) -> list:
    c = consumer(bootstrap, **kw)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        return poll_n(c, n)
    finally:
        c.close()


def test_roundtrip_keys_headers_nulls(bootstrap, topic):
    p = producer(bootstrap)
    try:
        meta = produce_all(p, topic, SAMPLES_KP)
    finally:
        p.close()
    assert [m.offset for m in meta] == list(range(len(SAMPLES_KP)))
    got = read_all(bootstrap, topic, len(SAMPLES_KP))
    assert [(r.offset, r.key, r.value, norm_headers(r.headers)) for r in got] == \
        [(i, k, v, h) for i, (k, v, h) in enumerate(SAMPLES_KP)]


def test_one_megabyte_value(bootstrap, make_topic):
    topic = make_topic(config=BIG_TOPIC_CONFIG)
    value = big_value()
    p = producer(bootstrap, max_request_size=3 * ONE_MB)
    try:
        produce_all(p, topic, [(b"big", value, [])])
    finally:
        p.close()
    got = read_all(bootstrap, topic, 1, max_partition_fetch_bytes=3 * ONE_MB,
                   fetch_max_bytes=3 * ONE_MB)
    assert got[0].key == b"big" and got[0].value == value


@pytest.mark.parametrize("codec", list(CODECS))
def test_compression(target, bootstrap, topic, codec):
    records = (SAMPLES_KP + [COMPRESSIBLE]) * 5
    p = producer(bootstrap, compression_type=None if codec == "none" else codec, linger_ms=50)
    try:
        produce_all(p, topic, records)
    finally:
        p.close()
    got = read_all(bootstrap, topic, len(records))
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _h in records]
    assert_stored_codec(target, topic, codec)


def test_idempotent_producer(target, bootstrap, make_topic):
    topic = make_topic(partitions=2)
    p = producer(bootstrap, enable_idempotence=True)
    try:
        for part in (0, 1):
            produce_all(p, topic, IDEMPOTENT_RECORDS, part)
    finally:
        p.close()
    for part in (0, 1):
        got = read_all(bootstrap, topic, 15, partition=part)
        assert [r.value for r in got] == [v for _k, v, _h in IDEMPOTENT_RECORDS]
        assert_idempotent_batches(target, topic, part)


def test_group_commit_and_rebalance(bootstrap, admin, make_topic):
    topic, group = make_topic(partitions=2), unique("group")
    p = producer(bootstrap)
    for part in (0, 1):
        produce_all(p, topic, [(None, b"p%d-%d" % (part, i), []) for i in range(5)], part)
    c1 = consumer(bootstrap, group_id=group)
    c2 = None
    try:
        c1.subscribe([topic])
        assert len(poll_n(c1, 10)) == 10
        assert len(c1.assignment()) == 2
        c1.commit()
        c2 = consumer(bootstrap, group_id=group)
        # The second member learns the topic's partitions before it joins: a kafka-python
        # member that leads an assignment without them assigns nothing ("No partition
        # metadata"), a client-side race that a fast join exposes.
        assert c2.partitions_for_topic(topic) == {0, 1}
        c2.subscribe([topic])

        def split() -> bool:
            c1.poll(timeout_ms=100)
            c2.poll(timeout_ms=100)
            a1, a2 = c1.assignment(), c2.assignment()
            return len(a1) == 1 and len(a2) == 1 and a1 != a2
        wait_for("both consumers own one partition", split, timeout=45, step=0)
        # c2 starts from the committed offsets: nothing old is read again.
        produce_all(p, topic, [(None, b"new", [])], partition=list(c2.assignment())[0].partition)
        got = poll_n(c2, 1)
        assert [r.value for r in got] == [b"new"]
        c2.commit()
    finally:
        p.close()
        c1.close()
        if c2 is not None:
            c2.close()
    offsets = admin.list_group_offsets({group: None})[group]
    assert sorted((tp.partition, om.offset) for tp, om in offsets.items()) in \
        ([(0, 6), (1, 5)], [(0, 5), (1, 6)])


def test_assign_seek_pause_resume(bootstrap, topic):
    p = producer(bootstrap)
    produce_all(p, topic, [(None, b"%d" % i, []) for i in range(5)])
    c = consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 2)
        assert [r.offset for r in poll_n(c, 3)] == [2, 3, 4]
        assert c.position(tp) == 5
        c.pause(tp)
        assert c.paused() == {tp}
        produce_all(p, topic, [(None, b"5", [])])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert not c.poll(timeout_ms=100), "a paused partition returned records"
        c.resume(tp)
        assert [r.value for r in poll_n(c, 1)] == [b"5"]
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        c.seek_to_end(tp)
        assert c.position(tp) == 6
    finally:
        p.close()
        c.close()


def test_auto_offset_reset(bootstrap, topic):
    p = producer(bootstrap)
    produce_all(p, topic, [(None, b"old", [])] * 3)
    tp = TopicPartition(topic, 0)
    early = consumer(bootstrap, group_id=unique("early"), auto_offset_reset="earliest")
    late = consumer(bootstrap, group_id=unique("late"), auto_offset_reset="latest")
    none = consumer(bootstrap, group_id=unique("none"), auto_offset_reset="none")
    try:
        early.assign([tp])
        assert poll_n(early, 3)[0].offset == 0
        late.assign([tp])
        assert late.position(tp) == 3
        produce_all(p, topic, [(None, b"new", [])])
        assert [r.value for r in poll_n(late, 1)] == [b"new"]
        none.assign([tp])
        with pytest.raises(Errors.NoOffsetForPartitionError):
            none.poll(timeout_ms=2000)
        none.seek(tp, 100)  # past the end: the broker answers OFFSET_OUT_OF_RANGE
        with pytest.raises(Errors.OffsetOutOfRangeError):
            for _ in range(50):
                none.poll(timeout_ms=100)
    finally:
        p.close()
        for c in (early, late, none):
            c.close()


def test_offsets_for_times(bootstrap, topic):
    base = int(time.time() * 1000) - 60_000
    p = producer(bootstrap)
    try:
        futs = [p.send(topic, value=b"t%d" % i, partition=0, timestamp_ms=base + i * 1000)
                for i in range(3)]
        p.flush(15)
        [f.get(15) for f in futs]
    finally:
        p.close()
    c = consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        found = c.offsets_for_times({tp: base + 500})[tp]
        assert (found.offset, found.timestamp) == (1, base + 1000)
        assert c.offsets_for_times({tp: base})[tp].offset == 0
        assert c.offsets_for_times({tp: base + 10_000})[tp] is None
        assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 3}
    finally:
        c.close()


def test_admin_topics(target, admin):
    name = unique("kp-admin")
    admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1,
                                "configs": {"retention.ms": "3600000"}}},
                        wait_for_metadata=True)
    target.created_topics.append(name)
    assert name in admin.list_topics()
    [desc] = admin.describe_topics([name])
    assert desc["name"] == name and len(desc["partitions"]) == 1
    admin.create_partitions({name: 3})
    wait_for("3 partitions", lambda: len(admin.describe_topics([name])[0]["partitions"]) == 3)
    res = ConfigResource(ConfigResourceType.TOPIC, name)
    cfg = admin.describe_configs([res])
    assert cfg["topic"][name]["retention.ms"]["value"] == "3600000", cfg
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                        configs={"retention.ms": "7200000"})])
    wait_for("retention.ms altered", lambda: admin.describe_configs(
        [res])["topic"][name]["retention.ms"]["value"] == "7200000")
    admin.delete_topics([name])
    wait_for("topic deleted", lambda: name not in admin.list_topics())
    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics({target.create_topic(): {"num_partitions": 1,
                                                     "replication_factor": 1}})
    with pytest.raises(Errors.InvalidReplicationFactorError):
        admin.create_topics({unique("kp-rf"): {"num_partitions": 1,
                                               "replication_factor": len(target.node_ids) + 2}})


def test_admin_describe_cluster(target, admin):
    cluster = admin.describe_cluster()
    assert sorted(b["broker_id"] for b in cluster["brokers"]) == target.node_ids
    assert cluster["cluster_id"]
    assert cluster["controller_id"] in target.node_ids + [-1]


def test_admin_groups_and_delete_records(target, bootstrap, admin, topic):
    p = producer(bootstrap)
    try:
        produce_all(p, topic, [(None, b"%d" % i, []) for i in range(4)])
    finally:
        p.close()
    group = unique("kp-admin-group")
    c = consumer(bootstrap, group_id=group)
    tp = TopicPartition(topic, 0)
    try:
        c.subscribe([topic])
        poll_n(c, 4)
        c.commit({tp: OffsetAndMetadata(3, "meta", -1)})
    finally:
        c.close()
    listed = {g["group_id"] for g in admin.list_groups()}
    assert group in listed
    desc = admin.describe_groups([group])[group]
    assert desc["group_state"] == "Empty" and desc["protocol_type"] == "consumer", desc
    offsets = admin.list_group_offsets({group: None})[group]
    assert {tp: (o.offset, o.metadata) for tp, o in offsets.items()} == {tp: (3, "meta")}
    deleted = admin.delete_groups([group])
    assert list(deleted) == [group] and deleted[group] == "OK", deleted
    assert group not in {g["group_id"] for g in admin.list_groups()}
    result = admin.delete_records({tp: 2})
    assert result[tp]["low_watermark"] == 2, result
    cons = consumer(bootstrap)
    try:
        assert cons.beginning_offsets([tp]) == {tp: 2}
    finally:
        cons.close()


def test_message_too_large_surfaces(bootstrap, make_topic):
    topic = make_topic(config={"max.message.bytes": "1000"})
    p = producer(bootstrap, retries=0)
    try:
        fut = p.send(topic, value=b"x" * 3000, partition=0)
        with pytest.raises(Errors.MessageSizeTooLargeError):
            fut.get(timeout=15)
    finally:
        p.close()


def test_describe_missing_topic(admin):
    # kafka-python hands back the topic's error code rather than raising.
    name = unique("nosuch")
    [desc] = admin.describe_topics([name])
    assert (desc["name"], desc["error_code"]) == (name, 3)  # UNKNOWN_TOPIC_OR_PARTITION
    missing = unique("nosuch-group")
    assert admin.delete_groups([missing]) == {missing: "GroupIdNotFoundError"}
