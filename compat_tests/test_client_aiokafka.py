# Client matrix: aiokafka. Produce/consume, codecs, idempotence, groups, seek/assign/pause/
# resume, auto.offset.reset, offsets for times, admin, and how aiokafka surfaces broker errors.
# Like kafka-python, aiokafka refuses a record whose key and value are both null. Its admin
# client has no way to delete consumer groups (no DeleteGroups call), and its describe_topics
# asks Metadata with auto-creation allowed, so a missing topic is only reported as missing on a
# broker with auto.create.topics.enable=false.
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import errors as Errors
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import OffsetAndMetadata

from compat_tests.clients_common import (BIG_TOPIC_CONFIG, CODECS, COMPRESSIBLE,
                                         CONSUMER_TIMEOUTS, ONE_MB,
                                         SAMPLES, IDEMPOTENT_RECORDS, assert_idempotent_batches,
                                         assert_stored_codec, big_value,
                                         norm_headers)
from compat_tests.conftest import unique

SAMPLES_AIO = [s for s in SAMPLES if s[0] is not None or s[1] is not None]


def producer(bootstrap, **kw) -> AIOKafkaProducer:
    kw.setdefault("acks", "all")
    return AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="compat-aiokafka",
                            request_timeout_ms=15000, **kw)


def consumer(bootstrap, **kw) -> AIOKafkaConsumer:
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="compat-aiokafka",
                            **CONSUMER_TIMEOUTS, **kw)


async def admin_client(bootstrap) -> AIOKafkaAdminClient:
    a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-aiokafka",
                            request_timeout_ms=15000)
    await a.start()
    return a


async def produce_all(p: AIOKafkaProducer, topic: str, samples, partition: int = 0) -> list:
    futs = [await p.send(topic, key=k, value=v, headers=h, partition=partition)
            for k, v, h in samples]
    return [(await f).offset for f in futs]


async def poll_n(c: AIOKafkaConsumer, n: int, timeout: float = 20.0) -> list:
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for msgs in (await c.getmany(timeout_ms=200)).values():
            out.extend(msgs)
    assert len(out) >= n, f"got {len(out)} of {n} records"
    return out


async def read_all(bootstrap, topic: str, n: int, partition: int = 0, **kw) -> list:
    c = consumer(bootstrap, **kw)
    await c.start()
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        return await poll_n(c, n)
    finally:
        await c.stop()


async def produce_samples(bootstrap, topic: str, samples, partition: int = 0, **kw) -> list:
    p = producer(bootstrap, **kw)
    await p.start()
    try:
        return await produce_all(p, topic, samples, partition)
    finally:
        await p.stop()


async def test_roundtrip_keys_headers_nulls(bootstrap, topic):
    assert await produce_samples(bootstrap, topic, SAMPLES_AIO) == list(range(len(SAMPLES_AIO)))
    got = await read_all(bootstrap, topic, len(SAMPLES_AIO))
    assert [(m.offset, m.key, m.value, norm_headers(m.headers)) for m in got] == \
        [(i, k, v, h) for i, (k, v, h) in enumerate(SAMPLES_AIO)]


async def test_one_megabyte_value(bootstrap, make_topic):
    topic = make_topic(config=BIG_TOPIC_CONFIG)
    value = big_value()
    await produce_samples(bootstrap, topic, [(b"big", value, [])], max_request_size=3 * ONE_MB)
    got = await read_all(bootstrap, topic, 1, max_partition_fetch_bytes=3 * ONE_MB,
                         fetch_max_bytes=3 * ONE_MB)
    assert got[0].key == b"big" and got[0].value == value


@pytest.mark.parametrize("codec", list(CODECS))
async def test_compression(target, bootstrap, topic, codec):
    records = (SAMPLES_AIO + [COMPRESSIBLE]) * 5
    await produce_samples(bootstrap, topic, records, linger_ms=50,
                          compression_type=None if codec == "none" else codec)
    got = await read_all(bootstrap, topic, len(records))
    assert [(m.key, m.value) for m in got] == [(k, v) for k, v, _h in records]
    assert_stored_codec(target, topic, codec)


async def test_idempotent_producer(target, bootstrap, make_topic):
    topic = make_topic(partitions=2)
    p = producer(bootstrap, enable_idempotence=True)
    await p.start()
    try:
        for part in (0, 1):
            await produce_all(p, topic, IDEMPOTENT_RECORDS, part)
    finally:
        await p.stop()
    for part in (0, 1):
        got = await read_all(bootstrap, topic, 15, partition=part)
        assert [m.value for m in got] == [v for _k, v, _h in IDEMPOTENT_RECORDS]
        assert_idempotent_batches(target, topic, part)


async def test_group_commit_and_rebalance(bootstrap, make_topic):
    topic, group = make_topic(partitions=2), unique("aio-group")
    for part in (0, 1):
        await produce_samples(bootstrap, topic,
                              [(None, b"p%d-%d" % (part, i), []) for i in range(5)], part)
    c1 = consumer(bootstrap, group_id=group)
    c2 = consumer(bootstrap, group_id=group)
    await c1.start()
    try:
        c1.subscribe([topic])
        assert len(await poll_n(c1, 10, timeout=30)) == 10
        await c1.commit()
        await c2.start()
        c2.subscribe([topic])
        deadline = time.monotonic() + 45
        while True:
            await asyncio.gather(c1.getmany(timeout_ms=100), c2.getmany(timeout_ms=100))
            a1, a2 = c1.assignment(), c2.assignment()
            if len(a1) == 1 and len(a2) == 1 and a1 != a2:
                break
            assert time.monotonic() < deadline, f"no split: {a1} {a2}"
        [mine] = list(c2.assignment())
        await produce_samples(bootstrap, topic, [(None, b"new", [])], mine.partition)
        assert [m.value for m in await poll_n(c2, 1)] == [b"new"]
        await c2.commit()
    finally:
        await c1.stop()
        await c2.stop()
    a = await admin_client(bootstrap)
    try:
        offsets = await a.list_consumer_group_offsets(group)
    finally:
        await a.close()
    assert sorted((tp.partition, om.offset) for tp, om in offsets.items()) in \
        ([(0, 6), (1, 5)], [(0, 5), (1, 6)])


async def test_assign_seek_pause_resume(bootstrap, topic):
    p = producer(bootstrap)
    await p.start()
    c = consumer(bootstrap)
    await c.start()
    try:
        await produce_all(p, topic, [(None, b"%d" % i, []) for i in range(5)])
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 2)
        assert [m.offset for m in await poll_n(c, 3)] == [2, 3, 4]
        assert await c.position(tp) == 5
        c.pause(tp)
        assert c.paused() == {tp}
        await produce_all(p, topic, [(None, b"5", [])])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert not await c.getmany(timeout_ms=100), "a paused partition returned records"
        c.resume(tp)
        assert [m.value for m in await poll_n(c, 1)] == [b"5"]
        await c.seek_to_beginning(tp)
        assert await c.position(tp) == 0
        await c.seek_to_end(tp)
        assert await c.position(tp) == 6
    finally:
        await p.stop()
        await c.stop()


async def test_auto_offset_reset(bootstrap, topic):
    await produce_samples(bootstrap, topic, [(None, b"old", [])] * 3)
    tp = TopicPartition(topic, 0)
    early = consumer(bootstrap, group_id=unique("early"), auto_offset_reset="earliest")
    late = consumer(bootstrap, group_id=unique("late"), auto_offset_reset="latest")
    none = consumer(bootstrap, group_id=unique("none"), auto_offset_reset="none")
    for c in (early, late, none):
        await c.start()
    try:
        early.assign([tp])
        assert (await poll_n(early, 3))[0].offset == 0
        late.assign([tp])
        assert await late.position(tp) == 3
        await produce_samples(bootstrap, topic, [(None, b"new", [])])
        assert [m.value for m in await poll_n(late, 1)] == [b"new"]
        none.assign([tp])
        with pytest.raises(Errors.NoOffsetForPartitionError):
            await none.getmany(timeout_ms=2000)
        none.seek(tp, 100)  # past the end: the broker answers OFFSET_OUT_OF_RANGE
        with pytest.raises(Errors.OffsetOutOfRangeError):
            for _ in range(50):
                await none.getmany(timeout_ms=100)
    finally:
        for c in (early, late, none):
            await c.stop()


async def test_offsets_for_times(bootstrap, topic):
    base = int(time.time() * 1000) - 60_000
    p = producer(bootstrap)
    await p.start()
    try:
        for i in range(3):
            await p.send_and_wait(topic, value=b"t%d" % i, partition=0,
                                  timestamp_ms=base + i * 1000)
    finally:
        await p.stop()
    c = consumer(bootstrap)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        found = (await c.offsets_for_times({tp: base + 500}))[tp]
        assert (found.offset, found.timestamp) == (1, base + 1000)
        assert (await c.offsets_for_times({tp: base + 10_000}))[tp] is None
        assert await c.beginning_offsets([tp]) == {tp: 0}
        assert await c.end_offsets([tp]) == {tp: 3}
    finally:
        await c.stop()


async def test_admin_topics(target, bootstrap):
    name = unique("aio-admin")
    a = await admin_client(bootstrap)
    try:
        r = await a.create_topics([NewTopic(name, 1, 1, topic_configs={"retention.ms": "3600000"})])
        assert [(t[0], t[1]) for t in r.topic_errors] == [(name, 0)], r
        target.created_topics.append(name)
        target.wait_for_leaders(name, 1)
        assert name in await a.list_topics()
        r = await a.create_partitions({name: NewPartitions(3)})
        assert [(t[0], t[1]) for t in r.topic_errors] == [(name, 0)], r
        target.wait_for_leaders(name, 3)
        [desc] = await a.describe_topics([name])
        assert desc["topic"] == name and len(desc["partitions"]) == 3
        res = ConfigResource(ConfigResourceType.TOPIC, name)
        assert _config(await a.describe_configs([res]), "retention.ms") == "3600000"
        await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                              configs={"retention.ms": "7200000"})])
        deadline = time.monotonic() + 15
        while _config(await a.describe_configs([res]), "retention.ms") != "7200000":
            assert time.monotonic() < deadline, "retention.ms not altered"
            await asyncio.sleep(0.1)
        r = await a.delete_topics([name])
        assert [(t[0], t[1]) for t in r.topic_error_codes] == [(name, 0)], r
        existing = target.create_topic()
        r = await a.create_topics([NewTopic(existing, 1, 1)])
        assert r.topic_errors[0][1] == 36  # TOPIC_ALREADY_EXISTS, handed back in the response
        r = await a.create_topics([NewTopic(unique("aio-rf"), 1, len(target.node_ids) + 2)])
        assert r.topic_errors[0][1] == 38  # INVALID_REPLICATION_FACTOR
    finally:
        await a.close()


def _config(responses, name: str) -> str:
    [resp] = responses
    [resource] = resp.resources
    assert resource[0] == 0, resource
    return {e[0]: e[1] for e in resource[4]}[name]


async def test_admin_describe_cluster(target, bootstrap):
    a = await admin_client(bootstrap)
    try:
        cluster = await a.describe_cluster()
    finally:
        await a.close()
    assert sorted(b["node_id"] for b in cluster["brokers"]) == target.node_ids
    assert cluster["cluster_id"] and cluster["controller_id"] in target.node_ids + [-1]


async def test_admin_groups_and_delete_records(bootstrap, topic):
    await produce_samples(bootstrap, topic, [(None, b"%d" % i, []) for i in range(4)])
    group = unique("aio-admin-group")
    tp = TopicPartition(topic, 0)
    c = consumer(bootstrap, group_id=group)
    await c.start()
    try:
        c.subscribe([topic])
        await poll_n(c, 4, timeout=30)
        await c.commit({tp: OffsetAndMetadata(3, "meta")})
    finally:
        await c.stop()
    a = await admin_client(bootstrap)
    try:
        assert group in {g[0] for g in await a.list_consumer_groups()}
        [desc] = await a.describe_consumer_groups([group])
        [g] = desc.groups
        assert (g[0], g[1], g[2], g[3]) == (0, group, "Empty", "consumer"), g
        offsets = await a.list_consumer_group_offsets(group)
        assert {k: (v.offset, v.metadata) for k, v in offsets.items()} == {tp: (3, "meta")}
        low = await a.delete_records({tp: RecordsToDelete(before_offset=2)})
        assert low == {tp: 2}
    finally:
        await a.close()
    cons = consumer(bootstrap)
    await cons.start()
    try:
        assert await cons.beginning_offsets([tp]) == {tp: 2}
    finally:
        await cons.stop()


async def test_message_too_large_surfaces(bootstrap, make_topic):
    topic = make_topic(config={"max.message.bytes": "1000"})
    p = producer(bootstrap)
    await p.start()
    try:
        with pytest.raises(Errors.MessageSizeTooLargeError):
            await p.send_and_wait(topic, value=b"x" * 3000, partition=0)
    finally:
        await p.stop()


async def test_describe_missing_topic(target_with):
    t = target_with({"auto.create.topics.enable": "false"})
    name = unique("nosuch")
    a = await admin_client(t.bootstrap)
    try:
        [desc] = await a.describe_topics([name])
    finally:
        await a.close()
    assert (desc["topic"], desc["error_code"]) == (name, 3)  # UNKNOWN_TOPIC_OR_PARTITION
