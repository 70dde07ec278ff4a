# Framing and connection behaviour, over raw sockets.
#
# What Kafka does, from its 3.8.0 source (apache/kafka):
# - RequestContext.parseRequest: an ApiVersions request at a version the broker does not know is
#   not parsed; it is answered as v0 with UNSUPPORTED_VERSION (35) and a list holding only
#   ApiVersions itself (ApiVersionsRequest.getErrorResponse; KIP-511). The request header for
#   ApiVersions v3+ is v2 (ApiMessageType.requestHeaderVersion), so a client probing a future
#   version sends header v2 — as done here.
# - SocketServer.Processor: one request per connection is in flight at a time (the channel is
#   muted until the response is sent), so pipelined requests are answered in order.
# - SocketServer.parseRequestHeader / processChannelException: a header with an unknown API key,
#   a version outside the advertised range (any key but ApiVersions, ApiKeys.isVersionEnabled),
#   a body that does not parse, or a negative size (NetworkReceive: InvalidReceiveException)
#   closes that connection without a response; other connections are untouched.
from __future__ import annotations

import socket
import struct
import time

import pytest

from compat_tests import wire

API_VERSIONS, METADATA, FETCH = 18, 3, 1


def _header_v2(api_key: int, version: int, cid: int, client_id: bytes = b"compat") -> bytes:
    return (struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id + b"\x00")


def _compact(s: bytes) -> bytes:
    return bytes([len(s) + 1]) + s


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _closed_without_answer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True when the peer closes the connection (EOF or reset) and sends nothing first."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = sock.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        if not data:
            return True
        return False  # the broker answered instead of closing
    return False


def _still_serves(conn: wire.Conn) -> None:
    resp = conn.call(API_VERSIONS, 0)
    assert resp.error_code == 0
    assert any(k.api_key == API_VERSIONS for k in resp.api_keys)


def test_api_versions_future_version_answered_at_v0(target):
    body = _compact(b"compat-tests") + _compact(b"1.0") + b"\x00"
    with target.conn() as c:
        c.send_raw(_frame(_header_v2(API_VERSIONS, 127, 4242) + body))
        frame = c.recv_frame()
        # The response header is v0 (correlation id only) and the body is v0.
        cid = struct.unpack_from(">i", frame)[0]
        assert cid == 4242
        resp = wire.response_class(API_VERSIONS)[0].decode(frame[4:])
        assert resp.error_code == 35  # UNSUPPORTED_VERSION
        # Kafka (ApiVersionsRequest.getErrorResponse) lists ApiVersions alone, with its full
        # range: all the client needs to pick the version to retry with.
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys == {API_VERSIONS: target.versions[API_VERSIONS]}
        # The connection stays usable: the client retries at a version from the list.
        _still_serves(c)


def test_api_versions_at_every_header_form(target):
    # v0-2 use request header v1, v3+ header v2; each is answered with a v0 response header.
    lo, hi = target.versions[API_VERSIONS]
    for v in range(lo, min(hi, wire.request_class(API_VERSIONS).max_version) + 1):
        with target.conn() as c:
            resp = c.call(API_VERSIONS, v, {"client_software_name": "compat-tests",
                                            "client_software_version": "1.0"})
            assert resp.error_code == 0, f"v{v}: {resp}"


def test_pipelined_requests_answered_in_order(target, topic):
    """Five requests in one write; the first waits in the broker, the rest must queue behind it."""
    fetch_v = target.version(FETCH)
    meta_v = target.version(METADATA)
    with target.conn() as c:
        # An empty-partition Fetch with max_wait 400 ms: a broker answering out of order would
        # send the Metadata and ApiVersions answers first.
        fetch = {"replica_id": -1, "max_wait_ms": 400, "min_bytes": 1, "max_bytes": 1 << 20,
                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                 "topics": [{"topic": topic, "topic_id": _topic_id(target, topic),
                             "partitions": [{"partition": 0, "fetch_offset": 0,
                                             "partition_max_bytes": 1 << 20}]}],
                 "forgotten_topics_data": [], "rack_id": ""}
        requests = [(FETCH, fetch_v, fetch), (METADATA, meta_v, {"topics": [{"name": topic}]}),
                    (API_VERSIONS, 0, {}), (METADATA, meta_v, {"topics": None}),
                    (API_VERSIONS, 0, {})]
        cids = [90001, 7, 31337, 12, 2**31 - 1]
        wire_bytes = b""
        for (key, v, fields), cid in zip(requests, cids):
            data, _ = c.encode(key, v, fields, correlation_id=cid)
            wire_bytes += data
            c._pending.append((cid, wire.response_class(key), v))
        c.send_raw(wire_bytes)
        answers = [c.recv() for _ in requests]  # recv() checks each correlation id in turn
        assert [a.header.correlation_id for a in answers] == cids
        assert answers[0].error_code == 0


def _topic_id(target, topic: str):
    return target.metadata([topic]).topics[0].topic_id


@pytest.mark.parametrize("kind", ["negative-size", "unknown-api-key", "garbage-body",
                                  "unadvertised-version"])
def test_malformed_frame_closes_only_that_connection(target, kind):
    other = target.conn()  # opened before the bad one, must survive it
    try:
        _still_serves(other)
        bad = socket.create_connection(other.sock.getpeername()[:2], timeout=10)
        try:
            if kind == "negative-size":
                payload = struct.pack(">i", -2) + b"\x00" * 16
            elif kind == "unknown-api-key":
                payload = _frame(struct.pack(">hhih", 32000, 0, 1, -1) + b"\x00" * 8)
            elif kind == "garbage-body":
                # A Metadata v1 header followed by an array length claiming a million topics
                # and then nothing: the body cannot be parsed.
                payload = _frame(struct.pack(">hhih", METADATA, 1, 1, -1)
                                 + struct.pack(">i", 1_000_000) + b"\xff\x7f")
            else:
                # Metadata one version above the advertised maximum (the body is the max
                # version's; Kafka rejects at the header, before reading it).
                hi = target.versions[METADATA][1]
                body = wire.build(METADATA, min(hi, wire.request_class(METADATA).max_version),
                                  {"topics": None}).encode()
                payload = _frame(_header_v2(METADATA, hi + 1, 1) + bytes(body))
            bad.sendall(payload)
            assert _closed_without_answer(bad), f"{kind}: connection not closed by the broker"
        finally:
            bad.close()
        _still_serves(other)
        with target.conn() as fresh:
            _still_serves(fresh)
    finally:
        other.close()
