# Property tests on the decoders a hostile client reaches first (kafkalite.wire.header,
# codec, records, record_iter): for any bytes, and for valid requests with bytes mutated,
# each decoder returns or raises its documented error, and nothing else.
# Huge declared lengths are included: wire/guard.py stops them before kio, which would
# otherwise abort the process (test_findings.py::test_huge_compact_array_length_...).
from __future__ import annotations

import struct

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.reliability.common import build_batch
from compat_tests.wire import build, has_schema
from kafkalite.broker.registry import HANDLERS
from kafkalite.wire.codec import decode_request
from kafkalite.wire.errors import KafkaError, MalformedRequest
from kafkalite.wire.header import parse_fixed, skip_tagged_fields
from kafkalite.wire.record_iter import iter_records
from kafkalite.wire.records import HEADER_SIZE, crc_ok, validate_produce_batch

import kafkalite.broker.handlers  # noqa: F401  (registers the handlers)

FAST = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
PAIRS = sorted((k, v) for k, h in HANDLERS.items()
               for v in range(max(h.min_version, h.decodable_from), h.max_version + 1)
               if has_schema(k, v))
VALID: dict[tuple[int, int], bytes] = {}
for _k, _v in PAIRS:
    try:
        _req = build(_k, _v, {})
        _req.with_header(correlation_id=1, client_id="h")
        VALID[(_k, _v)] = _req.encode(header=True, framed=True)[4:]
    except Exception:  # kafka-python cannot build this one with defaults
        pass


def _decode_body(key: int, version: int, frame: bytes) -> None:
    api_key, ver, _corr, _cid, pos = parse_fixed(frame)
    from kafkalite.wire.codec import is_flexible
    if is_flexible(key, version):
        pos = skip_tagged_fields(frame, pos)
    decode_request(key, version, frame, pos)


@FAST
@given(st.binary(max_size=200))
def test_parse_fixed_accepts_or_raises_malformed(data: bytes) -> None:
    try:
        api_key, version, corr, client_id, pos = parse_fixed(data)
    except MalformedRequest:
        return
    assert 10 <= pos <= len(data)


@FAST
@given(st.binary(max_size=64), st.integers(0, 64))
def test_skip_tagged_fields_accepts_or_raises_malformed(data: bytes, pos: int) -> None:
    try:
        end = skip_tagged_fields(data, min(pos, len(data)))
    except MalformedRequest:
        return
    assert end <= len(data)


@FAST
@given(st.sampled_from(PAIRS), st.one_of(
    st.binary(max_size=300),
    # a compact-array or string length as a 5-byte varint, up to 2^35
    st.tuples(st.binary(max_size=20), st.integers(2**28, 2**35 - 1), st.binary(max_size=20))
    .map(lambda t: t[0] + bytes([(t[1] >> s) & 0x7F | 0x80 for s in (0, 7, 14, 21)])
         + bytes([t[1] >> 28]) + t[2])))
def test_decode_request_on_random_bodies(pair: tuple[int, int], body: bytes) -> None:
    try:
        decode_request(pair[0], pair[1], body, 0)
    except MalformedRequest:
        pass


@FAST
@given(st.sampled_from(sorted(VALID)), st.data())
def test_decode_request_on_mutated_valid_requests(pair: tuple[int, int], data) -> None:
    frame = bytearray(VALID[pair])
    _decode_body(*pair, bytes(frame))  # the unmutated request decodes
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(10, max(10, len(frame) - 1)))
        op = data.draw(st.sampled_from(("set", "cut", "insert")))
        if op == "set" and i < len(frame):
            frame[i] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del frame[i:]
        else:
            frame[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    try:
        _decode_body(*pair, bytes(frame))
    except MalformedRequest:
        pass


def _crc_fixed(b: bytearray) -> bytes:
    if len(b) >= HEADER_SIZE:
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


@FAST
@given(st.binary(max_size=200), st.booleans())
def test_validate_produce_batch_on_random_bytes(data: bytes, fix_crc: bool) -> None:
    data = _crc_fixed(bytearray(data)) if fix_crc else data
    try:
        h = validate_produce_batch(data, 1 << 20)
    except KafkaError:
        return
    assert h.size == len(data) and crc_ok(data, 0, len(data)) and h.magic == 2


@FAST
@given(st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=60)), min_size=1,
                max_size=5), st.data())
def test_validate_produce_batch_on_mutated_batches(recs, data) -> None:
    b = bytearray(build_batch(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        _crc_fixed(b)
    try:
        validate_produce_batch(bytes(b), 1 << 20)
    except KafkaError:
        pass


@FAST
@given(st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=60)), min_size=1,
                max_size=5), st.sampled_from([0, 1, 2, 3, 4]), st.data())
def test_iter_records_on_mutated_batches(recs, codec: int, data) -> None:
    """Record decoding (ListOffsets by time, offsets replay) only raises the errors its
    callers catch, whatever the codec and the damage."""
    b = bytearray(build_batch(recs, codec=codec))
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(HEADER_SIZE, len(b) - 1))
        b[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):  # or claim a codec the payload is not in
        b[22] = (b[22] & 0xF8) | data.draw(st.integers(0, 4))
    try:
        list(iter_records(bytes(b)))
    except (ValueError, IndexError):
        pass
