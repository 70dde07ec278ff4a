# Core broker behaviour seen through unmodified clients: ListOffsets by timestamp, long-poll
# fetches woken by produce, LogAppendTime topics, and the errors Kafka answers for unknown
# topics, invalid topic names and records over max.message.bytes.
from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import (build_batch, call, connect, decode_records, fetch_raw,
                               produce_raw, simple_batch)
from tests.helpers.kclients import consume, produce

HOUR = 3_600_000


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- ListOffsets by timestamp ---------------------------------------------------------------

def test_offsets_for_times(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=2)
    base = _now_ms() - HOUR
    # Partition 0: timestamps base+0, +10, ... +490 in order; partition 1: out of order.
    p0 = [(0, b"k%d" % i, b"v" * 50, [], base + 10 * i) for i in range(50)]
    shuffled = [base + 7 * i for i in range(40)]
    random.Random(3).shuffle(shuffled)
    p1 = [(1, None, b"w%d" % i * 20, [], t) for i, t in enumerate(shuffled)]
    produce("confluent", kafka_broker, topic, p0 + p1, codec="zstd", **{"linger.ms": 50})

    def expect(part_records, ts):
        return next(((o, r[4]) for o, r in enumerate(part_records) if r[4] >= ts), None)
    queries = {0: [base - 5, base, base + 1, base + 255, base + 490, base + 491],
               1: [base - 1, base + 100, base + 200, base + 273, base + 274]}
    want = {(p, ts): expect(p0 if p == 0 else p1, ts) for p, tss in queries.items()
            for ts in tss}
    assert want[(0, base + 491)] is None and want[(0, base + 255)] == (26, base + 260)

    from kafka import KafkaConsumer, TopicPartition
    kc = KafkaConsumer(bootstrap_servers=kafka_broker)
    try:
        for (p, ts), w in want.items():
            got = kc.offsets_for_times({TopicPartition(topic, p): ts})[TopicPartition(topic, p)]
            assert (None if got is None else (got.offset, got.timestamp)) == w, ("kp", p, ts)
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        assert kc.end_offsets(tps) == {tps[0]: 50, tps[1]: 40}
        assert kc.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    finally:
        kc.close()

    import confluent_kafka as ck
    cc = ck.Consumer({"bootstrap.servers": kafka_broker, "group.id": "kl-oft"})
    try:
        for (p, ts), w in want.items():
            [r] = cc.offsets_for_times([ck.TopicPartition(topic, p, ts)], timeout=10)
            assert r.error is None
            assert r.offset == (w[0] if w else -1), ("confluent", p, ts)
        assert cc.get_watermark_offsets(ck.TopicPartition(topic, 1), timeout=10) == (0, 40)
    finally:
        cc.close()

    async def aio():
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP
        c = AIOKafkaConsumer(bootstrap_servers=kafka_broker)
        await c.start()
        try:
            for (p, ts), w in want.items():
                got = (await c.offsets_for_times({ATP(topic, p): ts}))[ATP(topic, p)]
                assert (None if got is None else (got.offset, got.timestamp)) == w, \
                    ("aiokafka", p, ts)
        finally:
            await c.stop()
    asyncio.run(aio())


# --- long poll ------------------------------------------------------------------------------

@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_long_poll_fetch_returns_promptly_after_produce(kafka_broker, kafka_topic, client):
    """The consumer waits up to 10 s per fetch; a produce must wake the waiting fetch, so
    the record arrives long before that (the bound below is half the fetch wait)."""
    topic = kafka_topic(partitions=1)
    produced_at: list[float] = []

    problems: list = []

    def produce_later():
        time.sleep(1.5)  # the consumer is parked in a long poll by now
        try:
            with connect(kafka_broker) as s:
                produced_at.append(time.monotonic())
                problems.append(produce_raw(s, topic, 0, simple_batch(1)).error_code)
        except Exception as e:  # reported by the assertion below
            problems.append(e)

    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=kafka_broker, group_id=None,
                          fetch_max_wait_ms=10_000, fetch_min_bytes=1,
                          auto_offset_reset="earliest", request_timeout_ms=30_000)
        c.assign([TopicPartition(topic, 0)])
        c.position(TopicPartition(topic, 0))
        poll = lambda: sum(len(v) for v in c.poll(200).values())  # noqa: E731
    else:
        import confluent_kafka as ck
        c = ck.Consumer({"bootstrap.servers": kafka_broker, "group.id": "kl-lp",
                         "fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1,
                         "auto.offset.reset": "earliest"})
        c.assign([ck.TopicPartition(topic, 0, 0)])
        poll = lambda: len([m for m in c.consume(10, 0.2) if m.error() is None])  # noqa
    t = threading.Thread(target=produce_later)
    try:
        for _ in range(3):
            assert poll() == 0
        t.start()
        deadline = time.monotonic() + 30
        got = 0
        while not got and time.monotonic() < deadline:
            got = poll()
        arrived = time.monotonic()
    finally:
        t.join(20)
        c.close()
    assert problems == [0]
    assert got == 1, f"nothing consumed {arrived - produced_at[0]:.1f}s after the produce"
    assert arrived - produced_at[0] < 5.0


# --- LogAppendTime ------------------------------------------------------------------------

def test_log_append_time_topic(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    before = _now_ms()
    old = before - 24 * HOUR
    with connect(kafka_broker) as s:
        r = produce_raw(s, topic, 0, build_batch([(b"a", b"1", [], old), (b"b", b"2", [], old)]))
        assert r.error_code == 0 and r.log_append_time_ms >= before
    produce("confluent", kafka_broker, topic, [(0, b"c", b"3", [], old)])
    after = _now_ms()
    for client in ("confluent", "kafka-python", "aiokafka"):
        got = consume(client, kafka_broker, topic, {0: 3})[0]
        assert [(tt, before <= ts <= after) for *_x, tt, ts in got] == [(1, True)] * 3, client
        assert got[0][6] == got[1][6] == r.log_append_time_ms
    # ListOffsets by time sees the append time, not the producer's.
    from kafka import KafkaConsumer, TopicPartition
    kc = KafkaConsumer(bootstrap_servers=kafka_broker)
    try:
        tp = TopicPartition(topic, 0)
        assert kc.offsets_for_times({tp: old})[tp].offset == 0
        assert kc.offsets_for_times({tp: after + 1})[tp] is None
    finally:
        kc.close()


# --- errors ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def no_autocreate_broker():
    bp = BrokerProcess(settings={"auto.create.topics.enable": "false"})
    bp.start()
    try:
        yield bp.bootstrap
    finally:
        bp.cleanup()


def _metadata_errors(bootstrap: str, names: list[str], allow_auto_create: bool = True):
    from kafka.protocol.metadata import MetadataRequest
    Req = MetadataRequest[12]
    with connect(bootstrap) as s:
        r = call(s, Req(topics=[Req.MetadataRequestTopic(name=n) for n in names],
                        allow_auto_topic_creation=allow_auto_create,
                        include_topic_authorized_operations=False))
    return {t.name: t.error_code for t in r.topics}


def test_unknown_topic_without_auto_create(no_autocreate_broker):
    assert _metadata_errors(no_autocreate_broker, ["missing-topic"]) == {"missing-topic": 3}
    with connect(no_autocreate_broker) as s:
        r = produce_raw(s, "missing-topic", 0, simple_batch(1))
        assert (r.error_code, r.base_offset) == (3, -1)  # UNKNOWN_TOPIC_OR_PARTITION
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": no_autocreate_broker}).list_topics(
        "missing-topic", timeout=10)
    assert md.topics["missing-topic"].error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    # Nothing was created along the way.
    assert _metadata_errors(no_autocreate_broker, ["missing-topic"]) == {"missing-topic": 3}


def test_auto_create_on_metadata(kafka_broker):
    name = f"auto-{random.randrange(1 << 30)}"
    assert _metadata_errors(kafka_broker, [name], allow_auto_create=False) == {name: 3}
    assert _metadata_errors(kafka_broker, [name]) == {name: 0}
    with connect(kafka_broker) as s:
        assert produce_raw(s, name, 0, simple_batch(1)).error_code == 0


def test_invalid_topic_names(kafka_broker):
    bad = ["", ".", "..", "a" * 250, "with space", "slash/name", "ünïcode", "star*"]
    assert _metadata_errors(kafka_broker, bad) == {n: 17 for n in bad}
    import confluent_kafka as ck
    errors = []
    p = ck.Producer({"bootstrap.servers": kafka_broker, "message.timeout.ms": 10_000})
    p.produce("bad topic!", b"x", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0
    assert [e.code() for e in errors] == [ck.KafkaError.TOPIC_EXCEPTION]
    # A name at the 249-character limit is fine.
    assert _metadata_errors(kafka_broker, ["b" * 249]) == {"b" * 249: 0}


def test_record_over_max_message_bytes(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=1, config={"max.message.bytes": "10000"})
    noise = random.Random(5).randbytes(20_000)  # incompressible: the batch stays large
    import confluent_kafka as ck
    errors = []
    p = ck.Producer({"bootstrap.servers": kafka_broker, "message.timeout.ms": 10_000})
    p.produce(topic, noise, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0
    assert [e.code() for e in errors] == [ck.KafkaError.MSG_SIZE_TOO_LARGE]

    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError
    kp = KafkaProducer(bootstrap_servers=kafka_broker, retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            kp.send(topic, noise).get(timeout=15)
    finally:
        kp.close(timeout=5)
    # Records under the limit still go through, and only they are in the log.
    produce("kafka-python", kafka_broker, topic, [(0, b"k", noise[:9000], [], None)])
    assert [r[3] for r in consume("confluent", kafka_broker, topic, {0: 1})[0]] == \
        [noise[:9000]]
    with connect(kafka_broker) as s:
        assert fetch_raw(s, topic, 0, 0).high_watermark == 1
        # The broker-wide default (message.max.bytes 1048588) applies to other topics.
        big = build_batch([(None, random.Random(6).randbytes(1_100_000), [], None)])
        assert produce_raw(s, topic, 0, big).error_code == 10
        other = f"{topic}-default"
        _metadata_errors(kafka_broker, [other])
        assert produce_raw(s, other, 0, big).error_code == 10
        assert produce_raw(s, other, 0, simple_batch(1)).error_code == 0
        assert len(decode_records(bytes(fetch_raw(s, other, 0, 0).records))) == 1
