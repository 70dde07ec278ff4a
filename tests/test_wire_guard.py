# Requests that declare absurd array lengths must close their connection, never the broker.
# kio's native reader preallocates compact arrays from the declared length; without the
# guard in kafkalite.wire.guard a ~2^32-element array aborts the whole process.
from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given, settings, strategies as st

from kafkalite.wire.codec import decode_request, request_class
from kafkalite.wire.errors import MalformedRequest
from kafkalite.wire.guard import check_body


def frame(api_key: int, version: int, body: bytes, flexible_header: bool = True) -> bytes:
    head = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    if flexible_header:
        head += b"\x00"
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


def huge_compact_array() -> bytes:
    return b"\xff\xff\xff\xff\x0f"  # uvarint 2^32-1: a compact array of 2^32-2 elements


def test_decode_refuses_huge_compact_array():
    with pytest.raises(MalformedRequest, match="elements"):
        decode_request(3, 12, huge_compact_array() + b"\x00\x00\x00", 0)


# (api key, version, bytes before the first top-level array)
CASES = [(3, 12, b""), (1, 12, b"\x00" * 25), (0, 9, b"\x00" + b"\x00" * 6), (19, 7, b""),
         (32, 4, b"")]


@pytest.mark.parametrize("api_key,version,prefix", CASES)
def test_broker_survives_huge_arrays(broker_process, api_key, version, prefix):
    with socket.create_connection(("127.0.0.1", broker_process.port), timeout=10) as s:
        s.sendall(frame(api_key, version, prefix + huge_compact_array() + b"\x00" * 32))
        s.settimeout(10)
        assert s.recv(4096) == b""  # the broker closed this connection
    # and it still answers: ApiVersions v0 on a new connection
    with socket.create_connection(("127.0.0.1", broker_process.port), timeout=10) as s:
        s.sendall(frame(18, 0, b"", flexible_header=False))
        size = struct.unpack(">i", s.recv(4))[0]
        assert size > 6
    assert "elements" in broker_process.read_log()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(0, 9), (0, 11), (1, 12), (1, 17), (3, 12), (19, 7), (11, 9)]),
       st.binary(max_size=200))
def test_guard_and_decoder_never_crash_on_random_bodies(key_version, body):
    api_key, version = key_version
    try:
        decode_request(api_key, version, body, 0)
    except MalformedRequest:
        pass


def test_guard_accepts_what_kio_wrote():
    import datetime
    import io
    from kio.serial import entity_writer
    cls = request_class(0, 11)
    mod = __import__(cls.__module__, fromlist=["x"])
    req = cls(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1),
              topic_data=(mod.TopicProduceData(name="t", partition_data=(
                  mod.PartitionProduceData(index=0, records=b"abc"),)),))
    buf = io.BytesIO()
    entity_writer(cls)(buf, req)
    check_body(cls, buf.getvalue(), 0)
