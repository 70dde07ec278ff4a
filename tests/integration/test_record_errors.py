"""Record-level errors (KIP-467, issue 10 item 11): a batch refused because of some of its
records names each of them (batch index and message) and says why in error_message, so a
client fails exactly those records and the others with "an invalid record in the same batch".
Each test runs against kafkalite and the real Kafka (`any_broker`), or compares the two."""
from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Producer

from tests.helpers.kbatch import CODECS, build_batch, connect, produce_raw
from tests.helpers.real_kafka import create_topic

INVALID_TIMESTAMP, INVALID_RECORD, INVALID_DIFFERENT_RECORD = 32, 87, -138


def _every_tenth_keyless(n: int = 100) -> list[tuple]:
    now = int(time.time() * 1000)
    return [(None if i % 10 == 0 else b"k%d" % i, b"v%d" % i, [], now) for i in range(n)]


def _answer(bootstrap: str, topic: str, batch: bytes, version: int) -> tuple:
    with connect(bootstrap) as s:
        r = produce_raw(s, topic, 0, batch, version=version)
    errors = [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] \
        if version >= 8 else None
    return r.error_code, r.base_offset, errors, getattr(r, "error_message", None)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_keyless_records_in_compacted_topic_are_each_named(any_broker, codec):
    topic = f"compacted-{uuid.uuid4().hex[:10]}"
    create_topic(any_broker, topic, {"cleanup.policy": "compact"})
    batch = build_batch(_every_tenth_keyless(), CODECS[codec])
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    code, base, errors, message = _answer(any_broker, topic, batch, version=9)
    assert (code, base) == (INVALID_RECORD, -1)
    assert errors == [(i, why) for i in range(0, 100, 10)]
    # Kafka's LogValidator.processRecordErrors, with RecordError.toString for the first 3.
    first = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in (0, 10, 20))
    assert message == ("One or more records have been rejected due to 10 record errors in "
                       f"total, and only showing the first three errors at most: [{first}]")
    # Before v8 the response has no room for them: the code alone.
    assert _answer(any_broker, topic, batch, version=7)[:3] == (INVALID_RECORD, -1, None)


def test_raw_answers_are_kafkas(kafka_broker, real_kafka):
    """The same raw Produce to both brokers: the same answer, field for field."""
    topic = f"compacted-{uuid.uuid4().hex[:10]}"
    batch = build_batch(_every_tenth_keyless(50), CODECS["lz4"])
    answers = []
    for bootstrap in (kafka_broker, real_kafka):
        create_topic(bootstrap, topic, {"cleanup.policy": "compact"})
        answers.append([_answer(bootstrap, topic, batch, v) for v in (3, 8, 9)])
    assert answers[0] == answers[1]


def test_records_out_of_the_timestamp_bounds_are_each_named(any_broker):
    topic = f"bounded-{uuid.uuid4().hex[:10]}"
    hour = 3_600_000
    create_topic(any_broker, topic, {"message.timestamp.before.max.ms": str(hour),
                                     "message.timestamp.after.max.ms": str(hour)})
    now = int(time.time() * 1000)
    stamps = [now - 2 * 24 * hour, now, now - 3 * 24 * hour, now, now]
    batch = build_batch([(b"k", b"v", [], ts) for ts in stamps])
    code, base, errors, message = _answer(any_broker, topic, batch, version=9)
    assert (code, base) == (INVALID_TIMESTAMP, -1)
    assert message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in errors] == [0, 2]
    for i, text in errors:
        m = re.fullmatch(rf"Timestamp {stamps[i]} of message with offset {i} is out of range\. "
                         r"The timestamp should be within \[(\d+), (\d+)\]", text)
        assert m, text
        low, high = int(m.group(1)), int(m.group(2))
        assert high - low == 2 * hour and low <= now <= high + hour


def test_client_fails_exactly_the_bad_records(any_broker):
    """librdkafka fails the keyless records with INVALID_RECORD and, knowing from
    record_errors that the others were refused only because of them, those with
    INVALID_DIFFERENT_RECORD; without record_errors it failed all with INVALID_RECORD."""
    topic = f"compacted-{uuid.uuid4().hex[:10]}"
    create_topic(any_broker, topic, {"cleanup.policy": "compact"})
    outcome: dict[int, int] = {}
    producer = Producer({"bootstrap.servers": any_broker, "linger.ms": 200,
                         "enable.idempotence": False, "retries": 0})
    for i in range(20):
        key = None if i % 10 == 0 else b"k%d" % i
        producer.produce(topic, value=b"v%d" % i, key=key,
                         on_delivery=lambda err, msg, i=i: outcome.__setitem__(
                             i, err.code() if err else 0))
    assert producer.flush(30) == 0
    assert outcome == {i: INVALID_RECORD if i % 10 == 0 else INVALID_DIFFERENT_RECORD
                       for i in range(20)}


def test_batch_larger_than_the_segment_is_refused(any_broker):
    """A batch over the topic's segment.bytes (though under max.message.bytes) cannot be
    written into one segment: RECORD_LIST_TOO_LARGE, no message, nothing written."""
    topic = f"small-seg-{uuid.uuid4().hex[:10]}"
    create_topic(any_broker, topic, {"segment.bytes": "65536"})
    now = int(time.time() * 1000)
    big = build_batch([(b"k%d" % i, b"x" * 1000, [], now) for i in range(100)])
    assert 65536 < len(big) < 1048588
    assert _answer(any_broker, topic, big, version=9) == (18, -1, [], None)
    small = build_batch([(b"k", b"x" * 1000, [], now)])
    assert _answer(any_broker, topic, small, version=9)[:2] == (0, 0)  # nothing before it
