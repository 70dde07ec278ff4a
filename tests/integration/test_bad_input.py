# Bad input over raw sockets. Kafka closes a connection whose frame it cannot accept
# (oversized or negative length, undecodable request, unknown API key, unsupported version),
# except ApiVersions at an unknown version, which is answered at v0 with
# UNSUPPORTED_VERSION and ApiVersions' own version range. After every case another client still
# produces and consumes, and the log stays readable.
from __future__ import annotations

import itertools
import socket
import struct
import time

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.consumer import ListOffsetsResponse
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
                                     MetadataResponse)
from kafka.protocol.producer import ProduceResponse

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import (call, connect, decode_records, decode_response, fetch_raw,
                               is_closed, produce_raw, recv_frame, request_bytes, simple_batch)
from tests.helpers.kclients import consume, produce

MAX_REQUEST = 1_000_000
TOPIC = "victim"
_seq = itertools.count()


@pytest.fixture(scope="module")
def broker():
    bp = BrokerProcess(settings={"socket.request.max.bytes": str(MAX_REQUEST),
                                 "num.partitions": "1"})
    bp.start()
    try:
        with connect(bp.bootstrap) as s:
            assert produce_raw(s, TOPIC, 0, simple_batch(1)).error_code in (0, 3)
        _wait_for_topic(bp.bootstrap)
        yield bp
    finally:
        bp.cleanup()


def _wait_for_topic(bootstrap: str) -> None:
    Req = MetadataRequest[12]
    with connect(bootstrap) as s:
        r = call(s, Req(topics=[Req.MetadataRequestTopic(name=TOPIC)],
                        allow_auto_topic_creation=True,
                        include_topic_authorized_operations=False))
        assert r.topics[0].error_code == 0


def healthy(bp: BrokerProcess) -> None:
    """A fresh connection produces a batch and reads it back; the whole log still reads."""
    assert bp.proc is not None and bp.proc.poll() is None, "broker died"
    tag = b"health-%d" % next(_seq)
    with connect(bp.bootstrap) as s:
        r = produce_raw(s, TOPIC, 0, simple_batch(2, tag=tag))
        assert r.error_code == 0
        data = b""
        offset = 0
        for _ in range(1000):
            part = fetch_raw(s, TOPIC, 0, offset)
            assert part.error_code == 0
            recs = decode_records(bytes(part.records))
            if not recs:
                break
            data += b"".join(v for *_x, v, _h in recs)
            offset = recs[-1][0] + 1
        assert offset == part.high_watermark
        assert data.endswith(tag + b"A" * 10 + tag + b"B" * 10)


def _raw(bp: BrokerProcess, payload: bytes) -> socket.socket:
    s = connect(bp.bootstrap)
    s.sendall(payload)
    return s


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _header(key: int, version: int, corr: int = 1, client: bytes = b"raw") -> bytes:
    return struct.pack(">hhih", key, version, corr, len(client)) + client


@pytest.mark.parametrize("name,payload", [
    ("over socket.request.max.bytes", struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 64),
    ("negative length", struct.pack(">i", -5) + b"\x00" * 16),
    ("empty frame", _frame(b"")),
    ("header shorter than its fixed part", _frame(b"\x00\x03\x00\x0c\x00")),
    ("client id past the frame", _frame(struct.pack(">hhih", 3, 1, 1, 500) + b"abc")),
    ("undecodable produce body", _frame(_header(0, 9) + b"\x00" + b"\xff" * 40)),
    ("unknown API key", _frame(_header(999, 0) + b"\x00" * 8)),
    ("unsupported Metadata version", _frame(_header(3, 99) + b"\x00" * 8)),
    ("Fetch below its minimum version", _frame(_header(1, 3) + b"\x00" * 40)),
])
def test_bad_frame_closes_only_that_connection(broker, name, payload):
    bystander = connect(broker.bootstrap)  # an open connection that must stay usable
    try:
        s = _raw(broker, payload)
        with s:
            assert is_closed(s), name
        r = call(bystander, ApiVersionsRequest[3](client_software_name="b",
                                                  client_software_version="1"))
        assert r.error_code == 0
    finally:
        bystander.close()
    healthy(broker)


def test_truncated_request_body_closes(broker):
    req = MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(name=TOPIC)],
                              allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    whole = bytes(request_bytes(req, 3))[4:]
    with _raw(broker, _frame(whole[:-3])) as s:
        assert is_closed(s)
    # Bytes after a complete body are ignored, as Kafka's parser does.
    with _raw(broker, _frame(whole + b"\x00\x00")) as s:
        corr, r = decode_response(MetadataResponse, 12, recv_frame(s))
        assert corr == 3 and [t.name for t in r.topics] == [TOPIC]
    healthy(broker)


def test_truncated_frame_then_hang_up(broker):
    """Half a frame, then nothing (and later a hang-up): the broker just waits for the rest
    and serves everyone else meanwhile."""
    s = _raw(broker, struct.pack(">i", 200) + b"\x00\x03\x00\x0c")
    healthy(broker)
    s.shutdown(socket.SHUT_WR)
    assert is_closed(s, timeout=10)
    s.close()
    healthy(broker)


def test_apiversions_unknown_version_answers_v0_and_keeps_the_connection(broker):
    with _raw(broker, _frame(_header(18, 99, corr=42) + b"\x00" * 6)) as s:
        corr, r = decode_response(ApiVersionsResponse, 0, recv_frame(s))
        assert corr == 42 and r.error_code == 35
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert keys == {18: (0, 4)}  # ApiVersions alone, as Kafka answers
        # The client retries at a version both sides know, on the same connection.
        r = call(s, ApiVersionsRequest[keys[18][1]](client_software_name="x",
                                                    client_software_version="1"),
                 correlation_id=43)
        assert r.error_code == 0
    healthy(broker)


def test_five_pipelined_requests_answered_in_order(broker):
    F = FetchRequest[12]
    LO = ListOffsetsRequest[7]
    M = MetadataRequest[12]
    with connect(broker.bootstrap) as s:
        end = fetch_raw(s, TOPIC, 0, 0).high_watermark
        batch = simple_batch(1, tag=b"pipelined")
        from kafka.protocol.producer import ProduceRequest
        P = ProduceRequest[9]
        reqs = [
            (F(replica_id=-1, max_wait_ms=300, min_bytes=1, max_bytes=1 << 20,
               isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
               rack_id="", topics=[F.FetchTopic(topic=TOPIC, partitions=[
                   F.FetchTopic.FetchPartition(partition=0, fetch_offset=end,
                                               partition_max_bytes=1 << 20)])]),
             FetchResponse),
            (M(topics=None, allow_auto_topic_creation=False,
               include_topic_authorized_operations=False), MetadataResponse),
            (P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
                P.TopicProduceData(name=TOPIC, partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=0, records=batch)])]),
             ProduceResponse),
            (ApiVersionsRequest[3](client_software_name="p", client_software_version="1"),
             ApiVersionsResponse),
            (LO(replica_id=-1, isolation_level=0, topics=[LO.ListOffsetsTopic(
                name=TOPIC, partitions=[LO.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, timestamp=-1, current_leader_epoch=-1)])]),
             ListOffsetsResponse),
        ]
        s.sendall(b"".join(bytes(request_bytes(r, 100 + i)) for i, (r, _c) in enumerate(reqs)))
        answers = []
        for i, (r, cls) in enumerate(reqs):
            corr, resp = decode_response(cls, r.API_VERSION, recv_frame(s))
            answers.append((corr, resp))
    assert [c for c, _r in answers] == [100, 101, 102, 103, 104]
    fetch, meta, prod, apiv, lo = (r for _c, r in answers)
    # The fetch was answered before the produce behind it ran: it waited, then found nothing.
    assert decode_records(bytes(fetch.responses[0].partitions[0].records)) == []
    assert TOPIC in [t.name for t in meta.topics]
    assert prod.responses[0].partition_responses[0].base_offset == end
    assert apiv.error_code == 0
    assert lo.topics[0].partitions[0].offset == end + 1
    healthy(broker)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_client_that_never_reads(broker):
    """A client pipelines fetches of ~1 MB each and never reads the answers: the broker stops
    reading from it once its write buffer is full, so memory stays bounded and everyone
    else is served."""
    with connect(broker.bootstrap) as s:
        for i in range(10):
            assert produce_raw(s, TOPIC, 0, simple_batch(1, size=100_000, tag=b"%d" % i),
                               correlation_id=i).error_code == 0
        start = fetch_raw(s, TOPIC, 0, 0).high_watermark - 10
    rss_before = _rss_kb(broker.proc.pid)
    greedy = socket.socket()
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    greedy.connect(("127.0.0.1", broker.port))
    greedy.setblocking(False)
    F = FetchRequest[12]
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2_000_000, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[F.FetchTopic(topic=TOPIC, partitions=[F.FetchTopic.FetchPartition(
                partition=0, fetch_offset=start, partition_max_bytes=2_000_000)])])
    frame = bytes(request_bytes(req, 1))
    sent = 0
    deadline = time.monotonic() + 5
    try:
        while sent < 5000 and time.monotonic() < deadline:
            try:
                greedy.send(frame)  # partial sends only garble the tail; nothing is read
                sent += 1
            except BlockingIOError:
                time.sleep(0.01)
        assert sent >= 20  # well past the broker's queue of 16
        healthy(broker)
        [(_p, off)] = produce("confluent", broker.bootstrap, TOPIC,
                              [(0, b"k", b"still fine", [], None)])
        got = consume("kafka-python", broker.bootstrap, TOPIC, {0: 1}, start={0: off})[0]
        assert [r[3] for r in got] == [b"still fine"]
        # Up to ~2 MB of answers per request were asked for; the broker holds a few only.
        assert _rss_kb(broker.proc.pid) - rss_before < 100_000
    finally:
        greedy.close()
    healthy(broker)
