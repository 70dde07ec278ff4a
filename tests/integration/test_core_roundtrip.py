# 10,000 keyed records with headers across 3 partitions, produced by each unmodified client
# with each compression codec and acks setting (some idempotent), consumed back by another
# client: byte-identical and in order per partition. The broker stores batches as sent, so
# the codec of the stored batches is checked too.
from __future__ import annotations

import random

import pytest

from tests.helpers.kbatch import batch_headers, connect, fetch_raw
from tests.helpers.kclients import CLIENTS, consume, produce

N = 10_000
PARTITIONS = 3
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def dataset(n: int = N, seed: int = 7) -> list[tuple]:
    """Keyed records with headers; some null keys, null values and empty values."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 97 == 1 and i % 101 else b"key-%d" % i
        if i % 101 == 0:
            value = None
        elif i % 103 == 0:
            value = b""
        else:
            value = (b"payload-%d-" % i) * rng.randint(1, 8) + rng.randbytes(rng.randint(0, 40))
        headers = [] if i % 5 == 0 else [("trace", b"%d" % i), ("bin", bytes(range(i % 7))),
                                         ("empty", b"")]
        out.append((i % PARTITIONS, key, value, headers, None))
    return out


def expected_by_partition(records: list[tuple]) -> dict[int, list[tuple]]:
    out: dict = {p: [] for p in range(PARTITIONS)}
    for part, key, value, headers, _ts in records:
        out[part].append((key, value, list(headers)))
    return out


# (producer, codec, acks, idempotent): every client produces with every codec; acks 0, 1
# and all and idempotence are spread over the matrix.
MATRIX = [
    ("confluent", "none", "all", True), ("confluent", "gzip", 1, False),
    ("confluent", "snappy", 0, False), ("confluent", "lz4", "all", True),
    ("confluent", "zstd", 1, False),
    ("kafka-python", "none", 1, False), ("kafka-python", "gzip", "all", True),
    ("kafka-python", "snappy", "all", False), ("kafka-python", "lz4", 0, False),
    ("kafka-python", "zstd", "all", True),
    ("aiokafka", "none", 0, False), ("aiokafka", "gzip", 1, False),
    ("aiokafka", "snappy", "all", True), ("aiokafka", "lz4", 1, False),
    ("aiokafka", "zstd", "all", True),
]


@pytest.mark.parametrize("producer,codec,acks,idempotent", MATRIX,
                         ids=[f"{p}-{c}-acks{a}{'-idem' if i else ''}" for p, c, a, i in MATRIX])
def test_roundtrip(kafka_broker, kafka_topic, producer, codec, acks, idempotent):
    topic = kafka_topic(partitions=PARTITIONS)
    records = dataset(seed=hash((producer, codec)) & 0xFFFF)
    acked = produce(producer, kafka_broker, topic, records, codec=codec, acks=acks,
                    idempotent=idempotent)
    per_part = {p: sum(1 for r in records if r[0] == p) for p in range(PARTITIONS)}
    if acks != 0:
        # Offsets are contiguous from 0 in send order within each partition.
        for p in range(PARTITIONS):
            assert [o for part, o in acked if part == p] == list(range(per_part[p]))
    consumer = CLIENTS[(CLIENTS.index(producer) + 1) % len(CLIENTS)]
    got = consume(consumer, kafka_broker, topic, per_part)
    want = expected_by_partition(records)
    for p in range(PARTITIONS):
        assert [r[1] for r in got[p]] == list(range(per_part[p])), f"partition {p} offsets"
        assert [(k, v, h) for _p, _o, k, v, h, _tt, _ts in got[p]] == want[p], \
            f"partition {p} differs"
    # Stored as sent: batches carry the producer's codec (clients send a batch that does
    # not shrink uncompressed).
    with connect(kafka_broker) as s:
        part = fetch_raw(s, topic, 0, 0)
        headers = batch_headers(bytes(part.records))
    codecs = {h.compression for h in headers}
    assert CODEC_IDS[codec] in codecs and codecs <= {0, CODEC_IDS[codec]}
    if idempotent:
        assert all(h.producer_id >= 0 for h in headers)


def test_large_value_within_message_max_bytes(kafka_broker, kafka_topic):
    """A ~1 MB record fits the default message.max.bytes (1048588) and comes back whole,
    even though it is larger than the consumers' per-partition fetch size (KIP-74)."""
    topic = kafka_topic(partitions=1)
    big = bytes(random.Random(1).randbytes(1_000_000))
    records = [(0, b"small-1", b"x", [], None), (0, b"big", big, [("h", b"1")], None),
               (0, b"small-2", b"y", [], None)]
    produce("confluent", kafka_broker, topic, records, codec="none",
            **{"message.max.bytes": 1048588})
    for client, extra in (("confluent", {"max.partition.fetch.bytes": 65536}),
                          ("kafka-python", {"max_partition_fetch_bytes": 65536}),
                          ("aiokafka", {"max_partition_fetch_bytes": 65536})):
        got = consume(client, kafka_broker, topic, {0: 3}, **extra)[0]
        assert [(k, v) for _p, _o, k, v, _h, _tt, _ts in got] == \
            [(b"small-1", b"x"), (b"big", big), (b"small-2", b"y")], client


def test_small_fetch_sizes_cut_batches_and_clients_cope(kafka_broker, kafka_topic):
    """With a per-partition fetch size smaller than a few batches, responses end in a
    partial batch (as Kafka's do); every client drops it and fetches on from there."""
    from tests.helpers.kbatch import build_batch, produce_raw
    topic = kafka_topic(partitions=1)
    want = []
    with connect(kafka_broker) as s:
        for b in range(30):
            recs = [(b"k%d-%d" % (b, i), b"v" * (20 + 7 * i), [("b", b"%d" % b)], None)
                    for i in range(10)]
            assert produce_raw(s, topic, 0, build_batch(recs, codec=b % 5)).error_code == 0
            want += [(k, v, h) for k, v, h, _t in recs]
    for client, extra in (("confluent", {"max.partition.fetch.bytes": 1500}),
                          ("kafka-python", {"max_partition_fetch_bytes": 1500}),
                          ("aiokafka", {"max_partition_fetch_bytes": 1500})):
        got = consume(client, kafka_broker, topic, {0: 300}, **extra)[0]
        assert [(k, v, h) for _p, _o, k, v, h, _tt, _ts in got] == want, client
