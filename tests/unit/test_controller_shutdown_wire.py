# ControlledShutdown's hand-written codec (kafkalite.wire.controlled_shutdown) against bytes
# laid out by hand from Kafka 3.8's ControlledShutdownRequest.json / Response.json and the
# request/response header versions (v0: request header v0 without client_id; v3: flexible,
# request header v2, response header v1). Interop with Kafka itself:
# tests/cluster/test_controlled_shutdown.py.
from __future__ import annotations

import struct

import pytest

from kafkalite.wire import controlled_shutdown as cs
from kafkalite.wire.errors import MalformedRequest
from kafkalite.wire.header import parse_fixed


def test_v0_request_has_no_client_id_and_only_the_broker_id():
    frame = cs.encode_request(cs.ControlledShutdownRequest(3, 99), 0, 7, "ignored")
    assert frame == struct.pack(">ihhii", 12, 7, 0, 7, 3)
    body = frame[4:]
    assert cs.decode_request(body, cs.body_start(body, 10, 0), 0) == \
        cs.ControlledShutdownRequest(3, cs.UNKNOWN_BROKER_EPOCH)


def test_v2_and_v3_requests_carry_the_broker_epoch():
    v2 = cs.encode_request(cs.ControlledShutdownRequest(3, 1 << 40), 2, 7, "b")
    assert v2[4:] == struct.pack(">hhih", 7, 2, 7, 1) + b"b" + struct.pack(">iq", 3, 1 << 40)
    v3 = cs.encode_request(cs.ControlledShutdownRequest(3, 5), 3, 7, "b")
    # header v2: client_id stays a plain string, then tagged fields; the body ends with its own
    assert v3[4:] == struct.pack(">hhih", 7, 3, 7, 1) + b"b" + b"\x00" + \
        struct.pack(">iq", 3, 5) + b"\x00"
    for version, frame in ((2, v2), (3, v3)):
        body = frame[4:]
        _key, _v, _corr, client_id, pos = parse_fixed(body)
        assert client_id == "b"
        assert cs.decode_request(body, cs.body_start(body, pos, version), version) == \
            cs.ControlledShutdownRequest(3, (1 << 40) if version == 2 else 5)


def test_responses_list_the_remaining_partitions():
    remaining = [("t", 0), ("uv", 2)]
    v1 = cs.encode_response(0, remaining, 1)
    assert v1 == struct.pack(">hi", 0, 2) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0) \
        + struct.pack(">h", 2) + b"uv" + struct.pack(">i", 2)
    v3 = cs.encode_response(0, remaining, 3)
    # compact array (n + 1), compact strings (len + 1), a tagged-field byte per entry and body
    assert v3 == struct.pack(">h", 0) + b"\x03" + b"\x02t" + struct.pack(">i", 0) + b"\x00" \
        + b"\x03uv" + struct.pack(">i", 2) + b"\x00" + b"\x00"
    for v in range(4):
        assert cs.decode_response(cs.encode_response(77, remaining, v), v) == (77, remaining)
        assert cs.decode_response(cs.encode_response(41, [], v), v) == (41, [])


def test_a_truncated_request_is_malformed():
    with pytest.raises(MalformedRequest):
        cs.decode_request(struct.pack(">i", 3), 0, 2)  # no epoch
