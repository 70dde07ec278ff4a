# Protocol behaviour clients rely on beyond single answers, as raw requests. From Apache Kafka
# 3.8.0's source:
# - acks=0 Produce gets no response at all (RequestChannel: NoOpResponse), and the connection
#   goes on answering later requests in order.
# - KIP-74: a Fetch returns the first batch whole even when it is larger than max_bytes and
#   partition_max_bytes, so a consumer always makes progress.
# - A Fetch waiting for min_bytes is completed as soon as a produce satisfies it
#   (DelayedFetch in the fetch purgatory), long before max_wait_ms.
# - Fetch sessions (KIP-227, FetchSession.scala): epoch 0 opens a session (non-zero id);
#   an incremental fetch answers only partitions with news; an unknown session id gives
#   FETCH_SESSION_ID_NOT_FOUND (70), a wrong epoch INVALID_FETCH_SESSION_EPOCH (71).
# - Idempotence (ProducerAppendInfo.checkSequence, UnifiedLog.append): a resent batch is answered
#   with its original offsets and not written again; a sequence gap is
#   OUT_OF_ORDER_SEQUENCE_NUMBER (45).
# - ProduceRequest.validateRecords (called by KafkaApis.handleProduceRequest): from v3 exactly
#   one batch per partition (else INVALID_RECORD, 87) and no zstd below v7
#   (UNSUPPORTED_COMPRESSION_TYPE, 76); UnifiedLog.analyzeAndValidateRecords: a bad CRC is
#   CORRUPT_MESSAGE (2); a partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION.
# - message.timestamp.type=LogAppendTime: the broker stamps the batch; Produce v2+ answers the
#   stamp in log_append_time_ms (LogValidator).
# - ListOffsets -3 (MAX_TIMESTAMP, v7+, KIP-734): the record with the largest timestamp.
# - ApiVersions v3+ with a client software name outside [a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?
#   is INVALID_REQUEST (42) (ApiVersionsRequest.isValid).
from __future__ import annotations

import struct
import time
import uuid

import pytest

from compat_tests.protocol_cases import (Ctx, batch, decode_records, fetch_fields,
                                         list_offset, produce)

pytestmark = pytest.mark.usefixtures("target")


@pytest.fixture
def ctx(target):
    return Ctx(target)


def latest(target, topic: str) -> int:
    return list_offset(target, topic, -1)


def test_acks_zero_gets_no_response(target, topic):
    v = min(target.version(0), 12)
    with target.conn() as c:
        c.send(0, v, Ctx.produce_fields(topic, None, batch([(None, b"a0", [])]), acks=0),
               expect_response=False)
        cid = c.send(18, 0)
        assert c.recv().header.correlation_id == cid
    assert latest(target, topic) == 1


def test_fetch_returns_oversized_first_batch(target, ctx, topic):
    records = [(b"k%d" % i, b"x" * 1000, []) for i in range(10)]
    assert produce(target, topic, batch(records)).error_code == 0
    fields = fetch_fields(topic, ctx.topic_id(topic), 0)
    fields["max_bytes"] = 100
    fields["topics"][0]["partitions"][0]["partition_max_bytes"] = 100
    part = target.call(1, fields).responses[0].partitions[0]
    assert part.error_code == 0
    assert [r.offset for r in decode_records(part.records)] == list(range(10))


def test_waiting_fetch_completes_on_produce(target, ctx, topic):
    # A loaded Kafka may not lead a just-created topic yet and answers a fetch at once with
    # NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_ID: wait (bounded) until it serves the partition,
    # so that the fetch below parks instead of failing fast.
    deadline = time.monotonic() + 15
    while True:
        with target.conn() as c:
            probe = c.call(1, target.version(1),
                           fetch_fields(topic, ctx.topic_id(topic), 0, max_wait=0))
        if probe.responses[0].partitions[0].error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    fields = fetch_fields(topic, ctx.topic_id(topic), 0, max_wait=30_000)
    with target.conn() as waiting:  # its 15 s read timeout is well under max_wait
        waiting.send(1, target.version(1), fields)
        time.sleep(0.3)  # let the fetch park (a fetch sent after the produce would pass anyway)
        assert produce(target, topic, batch([(None, b"wake", [])])).error_code == 0
        part = waiting.recv().responses[0].partitions[0]
    assert part.error_code == 0, part
    assert [r.value for r in decode_records(part.records)] == [b"wake"]


def test_fetch_sessions(target, ctx, topic):
    v = target.version(1)
    if v < 7:
        pytest.skip("fetch sessions need Fetch v7+")
    tid = ctx.topic_id(topic)
    assert produce(target, topic, batch([(None, b"a", []), (None, b"b", [])])).error_code == 0
    with target.conn() as c:
        full = fetch_fields(topic, tid, 0, max_wait=100)
        full["session_epoch"] = 0
        r = c.call(1, v, full)
        assert r.error_code == 0 and r.session_id != 0, "epoch 0 must open a session"
        sid = r.session_id
        assert len(decode_records(r.responses[0].partitions[0].records)) == 2
        # Epoch 1 moves the partition's offset to 2: nothing new, so nothing answered.
        inc = fetch_fields(topic, tid, 2, max_wait=200)
        inc.update(session_id=sid, session_epoch=1)
        r = c.call(1, v, inc)
        assert (r.error_code, r.session_id) == (0, sid)
        assert [p for t in r.responses for p in t.partitions] == []
        assert produce(target, topic, batch([(None, b"c", [])])).error_code == 0
        inc2 = fetch_fields(topic, tid, 0, max_wait=2000)
        inc2.update(session_id=sid, session_epoch=2, topics=[])
        r = c.call(1, v, inc2)
        assert r.error_code == 0
        parts = [p for t in r.responses for p in t.partitions]
        assert [r.value for r in decode_records(parts[0].records)] == [b"c"]
        stale = dict(inc2, session_epoch=7)
        assert c.call(1, v, stale).error_code == 71  # INVALID_FETCH_SESSION_EPOCH
        unknown = dict(inc2, session_id=sid + 12345, session_epoch=1)
        assert c.call(1, v, unknown).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND


def test_idempotent_duplicate_and_gap(target, topic):
    # Kafka's KRaft broker answers COORDINATOR_LOAD_IN_PROGRESS until its first block of
    # producer ids arrives from the controller; clients retry it (bounded here)
    deadline = time.monotonic() + 30
    with target.conn() as c:
        while True:
            pid = c.call(22, target.version(22), {"transactional_id": None,
                                                  "transaction_timeout_ms": 60000,
                                                  "producer_id": -1, "producer_epoch": -1})
            if pid.error_code != 14 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert pid.error_code == 0
    prod = (pid.producer_id, pid.producer_epoch)
    first = batch([(None, b"s0", []), (None, b"s1", []), (None, b"s2", [])], producer=(*prod, 0))
    assert (produce(target, topic, first).error_code, latest(target, topic)) == (0, 3)
    second = batch([(None, b"s3", []), (None, b"s4", [])], producer=(*prod, 3))
    assert produce(target, topic, second).base_offset == 3
    again = produce(target, topic, first)  # a retry of an acknowledged batch
    assert (again.error_code, again.base_offset) == (0, 0), again
    assert latest(target, topic) == 5, "a duplicate batch must not be written twice"
    gap = produce(target, topic, batch([(None, b"s9", [])], producer=(*prod, 9)))
    assert gap.error_code == 45, gap  # OUT_OF_ORDER_SEQUENCE_NUMBER
    ok = produce(target, topic, batch([(None, b"s5", [])], producer=(*prod, 5)))
    assert (ok.error_code, ok.base_offset) == (0, 5)


def test_produce_two_batches_is_invalid_record(target, topic):
    two = batch([(None, b"one", [])]) + batch([(None, b"two", [])])
    assert produce(target, topic, two).error_code == 87  # INVALID_RECORD
    assert latest(target, topic) == 0, "a rejected batch must not be written"


def test_produce_bad_crc_is_corrupt_message(target, topic):
    corrupt = bytearray(batch([(None, b"payload", [])]))
    corrupt[-2] ^= 0xFF
    assert produce(target, topic, bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE
    assert latest(target, topic) == 0, "a rejected batch must not be written"


def test_produce_zstd_below_v7_is_unsupported(target, topic):
    lo, hi = target.versions[0]
    if not lo <= 6 <= hi:
        pytest.skip("Produce v6 not advertised")
    zstd = batch([(None, b"z" * 100, [])], compression=4)
    assert produce(target, topic, zstd, version=6).error_code == 76  # UNSUPPORTED_COMPRESSION
    assert latest(target, topic) == 0, "a rejected batch must not be written"


def test_produce_to_missing_partition(target, topic):
    fields = Ctx.produce_fields(topic, None, batch([(None, b"p", [])]))
    fields["topic_data"][0]["partition_data"][0]["index"] = 5
    part = target.call(0, fields, min(target.version(0), 12)).responses[0].partition_responses[0]
    assert (part.index, part.error_code) == (5, 3)  # UNKNOWN_TOPIC_OR_PARTITION


def test_log_append_time(target, ctx, make_topic):
    topic = make_topic(config={"message.timestamp.type": "LogAppendTime"})
    sent_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: the broker must replace it
    part = produce(target, topic, batch([(None, b"x", []), (None, b"y", [])], timestamp=sent_ts))
    assert part.error_code == 0 and part.log_append_time_ms > sent_ts + 1_800_000, part
    fetched = target.call(1, fetch_fields(topic, ctx.topic_id(topic), 0)).responses[0]
    recs = decode_records(fetched.partitions[0].records)
    assert [r.timestamp for r in recs] == [part.log_append_time_ms] * 2
    assert {r.timestamp_type for r in recs} == {1}  # LOG_APPEND_TIME


def test_list_offsets_max_timestamp(target, topic):
    if target.versions[2][1] < 7:
        pytest.skip("MAX_TIMESTAMP needs ListOffsets v7+")
    base = int(time.time() * 1000) - 60_000
    for delta in (2000, 5000, 1000):
        b = batch([(None, b"%d" % delta, [])], timestamp=base + delta)
        assert produce(target, topic, b).error_code == 0
    r = target.call(2, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": -3, "current_leader_epoch": -1}]}]})
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp) == (0, 1, base + 5000), p


def test_api_versions_invalid_software_name(target):
    if target.versions[18][1] < 3:
        pytest.skip("client software names arrive with ApiVersions v3")
    with target.conn() as c:
        data, _ = c.encode(18, 3, {"client_software_name": "bad name!",
                                   "client_software_version": "1.0"})
        c.send_raw(data)
        frame = c.recv_frame()
    # Response header v0, then the body's error code (no need to decode the rest).
    assert struct.unpack_from(">h", frame, 4)[0] == 42  # INVALID_REQUEST


def test_timestamp_bounds_follow_topic_config(target, ctx, make_topic):
    """LogValidator.validateTimestamp: a CreateTime record outside
    [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] is
    INVALID_TIMESTAMP (32). The bound is read from the topic; set here so every target has one
    (3.x defaults to Long.MAX, 4.x to one hour)."""
    topic = make_topic(config={"message.timestamp.after.max.ms": "60000",
                               "message.timestamp.before.max.ms": "86400000"})
    now = int(time.time() * 1000)
    for ts in (now + 600_000, now - 2 * 86_400_000):
        part = produce(target, topic, batch([(None, b"t", [])], timestamp=ts))
        assert part.error_code == 32, f"timestamp {ts - now:+d} ms: {part}"
    assert produce(target, topic, batch([(None, b"now", [])], timestamp=now)).error_code == 0


def test_metadata_by_topic_id(target, ctx, topic):
    """KafkaApis.handleTopicMetadataRequest: from v12 topics may be asked by id alone; an
    unknown id is UNKNOWN_TOPIC_ID (100)."""
    if target.versions[3][1] < 12:
        pytest.skip("topic ids in Metadata need v12+")
    tid = ctx.topic_id(topic)
    resp = target.call(3, {"topics": [{"name": None, "topic_id": tid}],
                           "allow_auto_topic_creation": False}, 12)
    assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [(0, topic, tid)]
    other = uuid.uuid4()
    resp = target.call(3, {"topics": [{"name": None, "topic_id": other}],
                           "allow_auto_topic_creation": False}, 12)
    assert [(t.error_code, t.topic_id) for t in resp.topics] == [(100, other)]
