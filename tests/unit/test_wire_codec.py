# The hand-written codec paths, cross-checked against kafka-python's `kafka.protocol`, an
# independent implementation of the same message specs: what kafkalite encodes must decode
# there to the same values, and what kafka-python encodes must parse here.
from __future__ import annotations

import struct
import uuid

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from kafkalite.broker.handlers.api_versions import unsupported_version_body
from kafkalite.broker.handlers.fetch import encode_response as encode_fetch
from kafkalite.broker.handlers.produce import encode_response as encode_produce
from kafkalite.wire.codec import decode_request, is_flexible
from kafkalite.wire.errors import MalformedRequest
from kafkalite.wire.header import parse_fixed, response_header, skip_tagged_fields
from kafkalite.wire.primitives import bytes_len, read_uvarint, string, uvarint

from tests.helpers.kbatch import request_bytes, simple_batch

import kafkalite.broker.handlers  # noqa: F401  (registers every handler)


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_response_decodes_in_kafka_python(version):
    results = [
        ("orders", [(0, 0, 41, -1, 7, None), (2, 10, -1, -1, -1, "too big: ünïcode")]),
        ("x" * 300, [(1, 0, 0, 1_700_000_000_123, 0, None)]),
    ]
    data = encode_produce(version, results)
    r = ProduceResponse.decode(data, version=version)
    assert r.throttle_time_ms == 0
    assert [t.name for t in r.responses] == ["orders", "x" * 300]
    got = [(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
           for t in r.responses for p in t.partition_responses]
    assert got == [(0, 0, 41, -1), (2, 10, -1, -1), (1, 0, 0, 1_700_000_000_123)]
    parts = [p for t in r.responses for p in t.partition_responses]
    if version >= 5:
        assert [p.log_start_offset for p in parts] == [7, -1, 0]
    if version >= 8:
        assert [p.error_message for p in parts] == [None, "too big: ünïcode", None]
        assert all(p.record_errors == [] for p in parts)


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_response_decodes_in_kafka_python(version):
    tid = uuid.uuid4()
    key = tid if version >= 13 else "events"
    b1, b2 = simple_batch(3, tag=b"one"), simple_batch(1, size=5000, tag=b"two")
    topics = [(key, [(0, 0, 10, 2, b1), (1, 1, 5, 0, b""), (2, 0, 99, 0, b2)])]
    bufs = encode_fetch(version, 0, 77, topics)
    # Record data goes out by reference, as separate buffers, never concatenated.
    assert any(b is b1 for b in bufs) and any(b is b2 for b in bufs)
    r = FetchResponse.decode(b"".join(bufs), version=version)
    if version >= 7:
        assert (r.error_code, r.session_id) == (0, 77)
    [t] = r.responses
    assert (t.topic_id if version >= 13 else t.topic) == key
    got = [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
            bytes(p.records) if p.records is not None else None) for p in t.partitions]
    assert got == [(0, 0, 10, 10, b1), (1, 1, 5, 5, b""), (2, 0, 99, 99, b2)]
    for p in t.partitions:
        assert p.aborted_transactions is None
        if version >= 5:
            assert p.log_start_offset in (2, 0)
        if version >= 11:
            assert p.preferred_read_replica == -1


@pytest.mark.parametrize("version", [7, 12, 13, 17])
def test_fetch_response_top_level_error(version):
    r = FetchResponse.decode(b"".join(encode_fetch(version, 70, 0, [])), version=version)
    assert (r.error_code, r.session_id, r.responses) == (70, 0, [])


def test_apiversions_unsupported_version_body_is_v0():
    r = ApiVersionsResponse.decode(unsupported_version_body(), version=0)
    assert r.error_code == 35
    got = [(k.api_key, k.min_version, k.max_version) for k in r.api_keys]
    assert got == [(18, 0, 4)]  # only ApiVersions' own range, as Kafka answers


@pytest.mark.parametrize("req,flexible", [
    (MetadataRequest[1](topics=None), False),
    (MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(name="a")],
                         allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False), True),
    (ApiVersionsRequest[3](client_software_name="kp", client_software_version="3.0"), True),
    (ListOffsetsRequest[9](replica_id=-1, isolation_level=0, topics=[]), True),
])
def test_request_header_built_by_kafka_python(req, flexible):
    framed = bytes(request_bytes(req, 123456, client_id="clïent-1"))
    (size,) = struct.unpack_from(">i", framed)
    frame = framed[4:]
    assert size == len(frame)
    key, version, corr, client_id, pos = parse_fixed(frame)
    assert (key, version, corr, client_id) == (req.API_KEY, req.API_VERSION, 123456,
                                               "clïent-1")
    assert is_flexible(key, version) == flexible
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    decode_request(key, version, frame, pos)  # consumes the body exactly


def test_request_header_null_client_id_and_errors():
    frame = struct.pack(">hhih", 3, 1, 9, -1) + b"\xff\xff\xff\xff"
    assert parse_fixed(frame)[:4] == (3, 1, 9, None)
    with pytest.raises(MalformedRequest):
        parse_fixed(b"\x00\x03\x00")
    with pytest.raises(MalformedRequest):
        parse_fixed(struct.pack(">hhih", 3, 1, 9, 50) + b"abc")
    with pytest.raises(MalformedRequest):
        parse_fixed(struct.pack(">hhih", 3, 1, 9, -7))
    with pytest.raises(MalformedRequest):
        skip_tagged_fields(b"\x01\x05\x7f", 0)  # one tag whose 127 bytes are missing


def test_decode_request_rejects_truncation_ignores_trailing_bytes():
    frame = bytes(request_bytes(MetadataRequest[4](topics=[], allow_auto_topic_creation=True),
                                1))[4:]
    pos = parse_fixed(frame)[4]
    decode_request(3, 4, frame, pos)
    with pytest.raises(MalformedRequest):
        decode_request(3, 4, frame[:-1], pos)
    assert decode_request(3, 4, frame + b"\x00", pos) == decode_request(3, 4, frame, pos)


def _decode_as_broker(req):
    """A kafka-python request through kafkalite's header parser and body decoder."""
    frame = bytes(request_bytes(req, 4))[4:]
    key, version, _corr, _client, pos = parse_fixed(frame)
    if is_flexible(key, version):
        pos = skip_tagged_fields(frame, pos)
    return decode_request(key, version, frame, pos)


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_request_from_kafka_python_decodes(version):
    batch = simple_batch(4)
    Req = ProduceRequest[version]
    T = Req.TopicProduceData
    req = Req(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        T(name="t1", partition_data=[T.PartitionProduceData(index=2, records=batch)])])
    r = _decode_as_broker(req)
    [td] = r.topic_data
    [pd] = td.partition_data
    assert (td.name, pd.index, bytes(pd.records), r.acks) == ("t1", 2, batch, -1)


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_request_from_kafka_python_decodes(version):
    Req = FetchRequest[version]
    T = Req.FetchTopic
    tid = uuid.uuid4()
    req = Req(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1000, isolation_level=0,
              session_id=0, session_epoch=-1, topics=[
                  T(topic="t1", topic_id=tid, partitions=[T.FetchPartition(
                      partition=1, fetch_offset=42, partition_max_bytes=999)])],
              forgotten_topics_data=[], rack_id="")
    r = _decode_as_broker(req)
    [t] = r.topics
    assert (t.topic_id if version >= 13 else t.topic) == (tid if version >= 13 else "t1")
    [p] = t.partitions
    assert (p.partition, p.fetch_offset, p.partition_max_bytes) == (1, 42, 999)


def test_response_header():
    assert response_header(5, False) == b"\x00\x00\x00\x05"
    assert response_header(5, True) == b"\x00\x00\x00\x05\x00"


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**28 - 1])
def test_uvarint_roundtrip(n):
    enc = uvarint(n)
    assert read_uvarint(enc + b"\xff", 0) == (n, len(enc))


def test_primitive_strings():
    assert string(None, False) == b"\xff\xff" and string(None, True) == b"\x00"
    assert string("é", False) == b"\x00\x02\xc3\xa9" and string("é", True) == b"\x03\xc3\xa9"
    assert bytes_len(None, True) == b"\x00" and bytes_len(3, False) == b"\x00\x00\x00\x03"
    with pytest.raises(IndexError):
        read_uvarint(b"\x80\x80", 0)
