"""A topic's compression.type (issue 16): a batch in another codec is stored recompressed with
the topic's codec, as Kafka's LogValidator does; one already in it, or any batch in a
`producer` topic, is stored as sent. Runs against kafkalite and the real Kafka 3.8
(`any_broker`), or compares the two."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from kafkalite.wire.record_iter import iter_records
from tests.helpers.kbatch import (CODECS, batch_headers, build_batch, connect, fetch_raw,
                                  produce_raw, stored_form)
from tests.helpers.kclients import consume, produce
from tests.helpers.real_kafka import create_topic, eventually

TOPIC_CODECS = {"producer": None, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3,
                "zstd": 4}
N = 300


def _stored(bootstrap: str, topic: str, upto: int) -> bytes:
    """The partition's batches from offset 0, by raw Fetch, until `upto` records are in."""
    def read() -> bytes:
        with connect(bootstrap) as s:
            return bytes(fetch_raw(s, topic, 0, 0, max_bytes=8 << 20).records or b"")
    return eventually(read, lambda d: sum(h.records_count for h in batch_headers(d)) >= upto)


@pytest.mark.parametrize("topic_codec,client_codec", [
    ("gzip", "none"), ("zstd", "lz4"), ("uncompressed", "snappy"), ("producer", "lz4")])
def test_stored_codec_is_the_topics(any_broker, topic_codec, client_codec):
    topic = f"codec-{topic_codec}-{uuid.uuid4().hex[:8]}"
    create_topic(any_broker, topic, {"compression.type": topic_codec})
    now = int(time.time() * 1000)
    records = [(0, b"k%d" % i, b"value %d " % i * 30, [("h", b"%d" % i)], now + i)
               for i in range(N)]
    produce("confluent", any_broker, topic, records, codec=client_codec, idempotent=True,
            **{"batch.num.messages": 50})
    headers = batch_headers(_stored(any_broker, topic, N))
    expected = TOPIC_CODECS[topic_codec]
    expected = CODECS[client_codec] if expected is None else expected
    assert {h.compression for h in headers} == {expected}
    # The producer's id, epoch and sequences survive the rewrite: the idempotent producer's
    # batches still chain, sequence = offset.
    assert len({(h.producer_id, h.producer_epoch) for h in headers}) == 1
    assert headers[0].producer_id >= 0
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    got = consume("confluent", any_broker, topic, {0: N})[0]
    assert [(k, v, hd, ts) for _, _, k, v, hd, _, ts in got] == \
        [(k, v, hd, ts) for _, k, v, hd, ts in records]


def test_batch_in_the_topics_codec_is_stored_as_sent(any_broker):
    topic = f"same-{uuid.uuid4().hex[:8]}"
    create_topic(any_broker, topic, {"compression.type": "zstd"})
    batch = build_batch([(b"k%d" % i, b"v" * 200, [], int(time.time() * 1000))
                         for i in range(20)], CODECS["zstd"])
    with connect(any_broker) as s:
        assert produce_raw(s, topic, 0, batch).error_code == 0
    assert _stored(any_broker, topic, 20) == stored_form(batch, 0)


def test_recompressed_batch_matches_kafkas(kafka_broker, real_kafka):
    """The same raw lz4 batch into a zstd topic (level 9) of each broker: the same header
    fields and records (the compressed bytes themselves may differ between zstd builds)."""
    topic = f"rezstd-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    batch = build_batch([(b"k%d" % i, b"value-%d" % i * 50, [("h", b"x")], now + 3 * i)
                         for i in range(40)], CODECS["lz4"])
    seen = []
    for bootstrap in (kafka_broker, real_kafka):
        create_topic(bootstrap, topic, {"compression.type": "zstd",
                                        "compression.zstd.level": "9"})
        with connect(bootstrap) as s:
            assert produce_raw(s, topic, 0, batch).error_code == 0
        stored = _stored(bootstrap, topic, 40)
        (h,) = batch_headers(stored)
        seen.append(((h.attributes, h.base_offset, h.base_timestamp, h.max_timestamp,
                      h.last_offset_delta, h.records_count, h.producer_id, h.producer_epoch,
                      h.base_sequence),
                     [(r.offset, r.timestamp, r.key, r.value, r.headers)
                      for r in iter_records(stored)]))
    assert seen[0] == seen[1]
    assert seen[0][0][0] & 7 == CODECS["zstd"]


def test_altered_compression_type_applies_to_later_batches(any_broker):
    topic = f"alter-{uuid.uuid4().hex[:8]}"
    create_topic(any_broker, topic)
    batch = build_batch([(b"k", b"v" * 300, [], int(time.time() * 1000))], CODECS["lz4"])
    with connect(any_broker) as s:
        assert produce_raw(s, topic, 0, batch).error_code == 0
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("compression.type", "gzip",
                    incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": any_broker})
    admin.incremental_alter_configs([res])[res].result(timeout=30)

    def second_codec() -> list[int]:
        with connect(any_broker) as s:
            assert produce_raw(s, topic, 0, batch).error_code == 0
        return [h.compression for h in batch_headers(_stored(any_broker, topic, 1))]
    # Kafka applies a topic config change asynchronously: produce (bounded) until it shows.
    codecs = eventually(second_codec, lambda c: c[-1] == CODECS["gzip"])
    assert codecs[0] == CODECS["lz4"] and codecs[-1] == CODECS["gzip"]
