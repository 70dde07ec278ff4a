# kafkalite.produce.validate.records=true: Produce checks records as Kafka's LogValidator
# does, so the batches the default (header + CRC only) mode stores are refused with Kafka's
# error codes, while every real client's batches still go through.
from __future__ import annotations

import struct
import time

import crc32c
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.reliability.common import Broker, Conn, build_batch, create_topic, produce_batch

CORRUPT_MESSAGE, INVALID_TIMESTAMP, INVALID_RECORD = 2, 32, 87


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory):
    b = Broker(data_dir=str(tmp_path_factory.mktemp("strict") / "data"),
               settings={"kafkalite.produce.validate.records": "true"})
    b.start_measured()
    yield b
    b.cleanup()


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _produce(broker: Broker, topic: str, batch: bytearray) -> int:
    with Conn(broker.bootstrap) as c:
        create_topic(c, topic, 1)
        return produce_batch(c, topic, 0, _with_crc(batch))[0]


def test_batch_that_does_not_decompress_is_corrupt(strict_broker):
    b = bytearray(build_batch([(b"k", b"plain, not gzip")]))
    b[22] = (b[22] & 0xF8) | 1  # attributes claim gzip
    assert _produce(strict_broker, "not-gzip", b) == CORRUPT_MESSAGE


def test_garbage_records_are_corrupt(strict_broker):
    b = bytearray(build_batch([(b"k1", b"v" * 30), (b"k2", b"w" * 30)]))
    b[61:] = bytes([0xFF]) * (len(b) - 61)
    assert _produce(strict_broker, "garbage", b) == CORRUPT_MESSAGE


def test_record_timestamp_beyond_bounds_is_refused(strict_broker):
    """The batch's own bounds look fine (base = max = now); only the second record, whose
    delta puts it 10 days ahead, breaks message.timestamp.after.max.ms (1 h by default)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    now = int(time.time() * 1000)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=now, key=b"a", value=b"1", headers=[])
    builder.append(1, timestamp=now + 10 * 86_400_000, key=b"b", value=b"2", headers=[])
    b = bytearray(builder.build())
    struct.pack_into(">q", b, 35, now)  # maxTimestamp claims the present
    assert _produce(strict_broker, "ts-bounds", b) == INVALID_TIMESTAMP


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_real_client_batches_pass(strict_broker, codec):
    topic = f"strict-{codec}"
    p = Producer({"bootstrap.servers": strict_broker.bootstrap, "compression.type": codec,
                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i * 20, headers=[("h", b"x")])
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": strict_broker.bootstrap, "group.id": "g-" + codec,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 300 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.key())
    c.close()
    assert got == [b"k%d" % i for i in range(300)]
