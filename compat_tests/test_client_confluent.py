# Client matrix: confluent-kafka (librdkafka). Produce/consume, codecs, idempotence, groups,
# seek/assign/pause/resume, auto.offset.reset, offsets for times, admin, and how librdkafka
# surfaces broker errors. librdkafka spells auto.offset.reset=none as "error": the consumer then
# delivers an _AUTO_OFFSET_RESET error event instead of resetting.
from __future__ import annotations

import time

import pytest
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer, TopicCollection,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic, OffsetSpec, ResourceType)
from confluent_kafka import ConsumerGroupTopicPartitions

from compat_tests.clients_common import (BIG_TOPIC_CONFIG, CODECS, COMPRESSIBLE, ONE_MB,
                                         SAMPLES, IDEMPOTENT_RECORDS, assert_idempotent_batches,
                                         assert_stored_codec, big_value,
                                         norm_headers, wait_for)
from compat_tests.conftest import unique


def producer(bootstrap, **conf) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "client.id": "compat-confluent",
                     "acks": "all", "linger.ms": 5, **conf})


def consumer(bootstrap, group: str | None = None, **conf) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "client.id": "compat-confluent",
                     "group.id": group or unique("cf-consumer"), "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, **conf})


@pytest.fixture
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "compat-confluent"})


def produce_all(p: Producer, topic: str, samples, partition: int = 0, **kw) -> list:
    reports = []
    for k, v, h in samples:
        p.produce(topic, value=v, key=k, headers=h or None, partition=partition,
                  on_delivery=lambda err, msg: reports.append((err, msg)), **kw)
    assert p.flush(20) == 0, "messages still queued"
    errors = [err for err, _m in reports if err is not None]
    assert not errors, errors
    return sorted(m.offset() for _e, m in reports)


def poll_n(c: Consumer, n: int, timeout: float = 20.0) -> list:
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(num_messages=n - len(out), timeout=0.2):
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
    assert len(out) >= n, f"got {len(out)} of {n} records"
    return out


def read_all(bootstrap, topic: str, n: int, partition: int = 0, **conf) -> list:
    c = consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        return poll_n(c, n)
    finally:
        c.close()


def test_roundtrip_keys_headers_nulls(bootstrap, topic):
    p = producer(bootstrap)
    assert produce_all(p, topic, SAMPLES) == list(range(len(SAMPLES)))
    got = read_all(bootstrap, topic, len(SAMPLES))
    assert [(m.offset(), m.key(), m.value(), norm_headers(m.headers())) for m in got] == \
        [(i, k, v, h) for i, (k, v, h) in enumerate(SAMPLES)]


def test_one_megabyte_value(bootstrap, make_topic):
    topic = make_topic(config=BIG_TOPIC_CONFIG)
    value = big_value()
    p = producer(bootstrap, **{"message.max.bytes": 3 * ONE_MB})
    produce_all(p, topic, [(b"big", value, [])])
    got = read_all(bootstrap, topic, 1, **{"fetch.max.bytes": 3 * ONE_MB,
                                           "max.partition.fetch.bytes": 3 * ONE_MB,
                                           "receive.message.max.bytes": 4 * ONE_MB})
    assert got[0].key() == b"big" and got[0].value() == value


@pytest.mark.parametrize("codec", list(CODECS))
def test_compression(target, bootstrap, topic, codec):
    p = producer(bootstrap, **{"compression.type": codec, "linger.ms": 50})
    records = (SAMPLES + [COMPRESSIBLE]) * 5
    produce_all(p, topic, records)
    got = read_all(bootstrap, topic, len(records))
    assert [(m.key(), m.value()) for m in got] == [(k, v) for k, v, _h in records]
    assert_stored_codec(target, topic, codec)


def test_idempotent_producer(target, bootstrap, make_topic):
    topic = make_topic(partitions=2)
    p = producer(bootstrap, **{"enable.idempotence": True})
    for part in (0, 1):
        produce_all(p, topic, IDEMPOTENT_RECORDS, part)
    for part in (0, 1):
        got = read_all(bootstrap, topic, 15, partition=part)
        assert [m.value() for m in got] == [v for _k, v, _h in IDEMPOTENT_RECORDS]
        assert_idempotent_batches(target, topic, part)


def test_group_commit_and_rebalance(bootstrap, admin, make_topic):
    topic, group = make_topic(partitions=2), unique("cf-group")
    p = producer(bootstrap)
    for part in (0, 1):
        produce_all(p, topic, [(None, b"p%d-%d" % (part, i), []) for i in range(5)], part)
    c1 = consumer(bootstrap, group)
    c2 = consumer(bootstrap, group)
    try:
        c1.subscribe([topic])
        assert len(poll_n(c1, 10, timeout=30)) == 10
        c1.commit(asynchronous=False)
        c2.subscribe([topic])

        def split() -> bool:
            for c in (c1, c2):
                for m in c.consume(num_messages=10, timeout=0.1):
                    assert not m.error() and False, f"unexpected record {m.value()}"
            a1, a2 = c1.assignment(), c2.assignment()
            return len(a1) == 1 and len(a2) == 1 and a1[0].partition != a2[0].partition
        wait_for("both consumers own one partition", split, timeout=45, step=0)
        produce_all(p, topic, [(None, b"new", [])], partition=c2.assignment()[0].partition)
        assert [m.value() for m in poll_n(c2, 1)] == [b"new"]
        c2.commit(asynchronous=False)
    finally:
        c1.close()
        c2.close()
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    offsets = sorted((tp.partition, tp.offset) for tp in res.result(15).topic_partitions)
    assert offsets in ([(0, 6), (1, 5)], [(0, 5), (1, 6)])


def test_assign_seek_pause_resume(bootstrap, topic):
    p = producer(bootstrap)
    produce_all(p, topic, [(None, b"%d" % i, []) for i in range(5)])
    c = consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0, 2)
        c.assign([tp])
        assert [m.offset() for m in poll_n(c, 3)] == [2, 3, 4]
        assert c.position([TopicPartition(topic, 0)])[0].offset == 5
        c.pause([TopicPartition(topic, 0)])
        produce_all(p, topic, [(None, b"5", [])])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert not c.consume(num_messages=1, timeout=0.1), "paused partition returned data"
        c.resume([TopicPartition(topic, 0)])
        assert [m.value() for m in poll_n(c, 1)] == [b"5"]
        c.seek(TopicPartition(topic, 0, 1))
        assert [m.offset() for m in poll_n(c, 5)] == [1, 2, 3, 4, 5]
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 6)
    finally:
        c.close()


def test_auto_offset_reset(bootstrap, topic):
    p = producer(bootstrap)
    produce_all(p, topic, [(None, b"old", [])] * 3)
    early = consumer(bootstrap, **{"auto.offset.reset": "earliest"})
    late = consumer(bootstrap, **{"auto.offset.reset": "latest"})
    none = consumer(bootstrap, **{"auto.offset.reset": "error"})
    try:
        early.subscribe([topic])
        assert poll_n(early, 3, timeout=30)[0].offset() == 0
        late.assign([TopicPartition(topic, 0)])
        # librdkafka resolves "latest" asynchronously: keep producing until one arrives; the
        # first record read must be a new one, never an old one.
        first = wait_for("a record for the latest consumer",
                         lambda: produce_all(p, topic, [(None, b"new", [])]) and
                         late.consume(num_messages=1, timeout=0.3))
        assert (first[0].value(), first[0].offset() >= 3) == (b"new", True)
        # No committed offset and no reset policy: an error event, not records.
        none.assign([TopicPartition(topic, 0)])
        err = wait_for("auto.offset.reset=error event", lambda: _error_event(none))
        assert err.code() == KafkaError._AUTO_OFFSET_RESET, err
        # Past the end: the broker's OFFSET_OUT_OF_RANGE surfaces the same way.
        none.assign([TopicPartition(topic, 0, 100)])
        err = wait_for("out-of-range event", lambda: _error_event(none))
        assert err.code() == KafkaError._AUTO_OFFSET_RESET and "range" in err.str().lower(), err
    finally:
        for c in (early, late, none):
            c.close()


def _error_event(c: Consumer):
    for m in c.consume(num_messages=5, timeout=0.2):
        if m.error():
            return m.error()
    return None


def test_offsets_for_times(bootstrap, topic):
    base = int(time.time() * 1000) - 60_000
    p = producer(bootstrap)
    for i in range(3):
        produce_all(p, topic, [(None, b"t%d" % i, [])], timestamp=base + i * 1000)
    c = consumer(bootstrap)
    try:
        [found] = c.offsets_for_times([TopicPartition(topic, 0, base + 500)], timeout=10)
        assert found.offset == 1
        [after] = c.offsets_for_times([TopicPartition(topic, 0, base + 10_000)], timeout=10)
        assert after.offset == -1  # librdkafka's OFFSET_END: no record that late
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 3)
    finally:
        c.close()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_admin_topics(target, admin):
    name = unique("cf-admin")
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1,
                                  config={"retention.ms": "3600000"})])[name].result(15)
    target.created_topics.append(name)
    target.wait_for_leaders(name, 1)
    assert name in admin.list_topics(timeout=10).topics
    desc = admin.describe_topics(TopicCollection([name]))[name].result(15)
    assert desc.name == name and len(desc.partitions) == 1
    admin.create_partitions([NewPartitions(name, 3)])[name].result(15)
    target.wait_for_leaders(name, 3)
    res = ConfigResource(ResourceType.TOPIC, name)
    assert admin.describe_configs([res])[res].result(15)["retention.ms"].value == "3600000"
    inc = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([inc])[inc].result(15)
    wait_for("retention.ms altered", lambda: retention(admin, res) == "7200000")
    alt = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "9000000"})
    admin.alter_configs([alt])[alt].result(15)
    wait_for("retention.ms replaced", lambda: retention(admin, res) == "9000000")
    off = admin.list_offsets({TopicPartition(name, 0): OffsetSpec.latest()})
    assert off[TopicPartition(name, 0)].result(15).offset == 0
    admin.delete_topics([name])[name].result(15)
    wait_for("topic deleted", lambda: name not in admin.list_topics(timeout=10).topics)
    existing = target.create_topic()
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(existing, 1, 1)])[existing].result(15)
    assert e.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    bad = unique("cf-rf")
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(bad, 1, len(target.node_ids) + 2)])[bad].result(15)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


def retention(admin: AdminClient, res: ConfigResource) -> str:
    return admin.describe_configs([res])[res].result(15)["retention.ms"].value


def test_admin_describe_cluster(target, admin):
    cluster = admin.describe_cluster().result(15)
    assert sorted(n.id for n in cluster.nodes) == target.node_ids
    assert cluster.cluster_id
    assert cluster.controller is None or cluster.controller.id in target.node_ids


def test_admin_groups_and_delete_records(bootstrap, admin, topic):
    p = producer(bootstrap)
    produce_all(p, topic, [(None, b"%d" % i, []) for i in range(4)])
    group = unique("cf-admin-group")
    c = consumer(bootstrap, group)
    try:
        c.subscribe([topic])
        poll_n(c, 4, timeout=30)
        c.commit(offsets=[TopicPartition(topic, 0, 3, metadata="meta")], asynchronous=False)
    finally:
        c.close()
    listed = admin.list_consumer_groups().result(15)
    assert group in {g.group_id for g in listed.valid}
    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert desc.group_id == group and str(desc.state).endswith("EMPTY") and not desc.members
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    tps = res.result(15).topic_partitions
    assert [(t.topic, t.partition, t.offset, t.metadata) for t in tps] == \
        [(topic, 0, 3, "meta")]
    admin.delete_consumer_groups([group])[group].result(15)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    tp = TopicPartition(topic, 0, 2)
    deleted = admin.delete_records([tp])[tp].result(15)
    assert deleted.low_watermark == 2
    cons = consumer(bootstrap)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (2, 4)
    finally:
        cons.close()


def test_message_too_large_surfaces(bootstrap, make_topic):
    topic = make_topic(config={"max.message.bytes": "1000"})
    p = producer(bootstrap, **{"retries": 0})
    reports = []
    p.produce(topic, value=b"x" * 3000, partition=0,
              on_delivery=lambda err, msg: reports.append(err))
    p.flush(20)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, reports[0]


def test_describe_missing_topic(admin):
    name = unique("nosuch")
    with pytest.raises(KafkaException) as e:
        admin.describe_topics(TopicCollection([name]))[name].result(15)
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
