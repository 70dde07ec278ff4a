# ControlledShutdown (key 7), v0-3, encoded by hand: kio has no schema for it (Kafka 4 removed
# it with ZooKeeper mode). Kafka 3.8's ControlledShutdownRequest.json / Response.json:
#
#   request   BrokerId int32; BrokerEpoch int64 (v2+, -1 when unknown); v3 flexible
#   response  ErrorCode int16; RemainingPartitions [TopicName string, PartitionIndex int32]
#             (v0 names the field differently, the bytes are the same); v3 flexible
#
# v0 requests carry request header v0: no client_id (ApiMessageType.requestHeaderVersion), so
# the body starts right after the correlation id. v3 requests use header v2 (tagged fields
# after client_id) and v3 responses header v1 (a tagged-field byte after the correlation id).
# Sans-I/O: bytes in, bytes out, for both the serving broker and the shutting-down one.
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from .errors import MalformedRequest
from .header import response_header, skip_tagged_fields
from .primitives import array_len, pack_i16, pack_i32, pack_i64, read_uvarint, string

API_KEY = 7
MIN_VERSION, MAX_VERSION = 0, 3
UNKNOWN_BROKER_EPOCH = -1
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">hhi")


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = UNKNOWN_BROKER_EPOCH


def flexible(version: int) -> bool:
    return version >= 3


def body_start(frame: bytes, pos_after_client_id: int, version: int) -> int:
    """Where the body of a request frame starts (see the header versions above)."""
    if version == 0:
        return _HEAD.size
    return skip_tagged_fields(frame, pos_after_client_id) if flexible(version) \
        else pos_after_client_id


def decode_request(frame: bytes, pos: int, version: int) -> ControlledShutdownRequest:
    try:
        (broker_id,) = _I32.unpack_from(frame, pos)
        epoch = _I64.unpack_from(frame, pos + 4)[0] if version >= 2 else UNKNOWN_BROKER_EPOCH
    except struct.error:
        raise MalformedRequest(f"ControlledShutdownRequest v{version} truncated") from None
    return ControlledShutdownRequest(broker_id, epoch)


def encode_request(req: ControlledShutdownRequest, version: int, correlation_id: int,
                   client_id: str | None) -> bytes:
    """A whole request frame (with its length prefix)."""
    head = _HEAD.pack(API_KEY, version, correlation_id)
    if version > 0:
        head += string(client_id, False)  # header v1/v2: client_id is never compact
    if flexible(version):
        head += b"\x00"
    body = pack_i32(req.broker_id)
    if version >= 2:
        body += pack_i64(req.broker_epoch)
    if flexible(version):
        body += b"\x00"
    return pack_i32(len(head) + len(body)) + head + body


def encode_response(error_code: int, remaining: Sequence[tuple[str, int]],
                    version: int) -> bytes:
    """The response body; with response_header() before it."""
    flex = flexible(version)
    parts = [pack_i16(error_code), array_len(len(remaining), flex)]
    for topic, partition in remaining:
        parts += [string(topic, flex), pack_i32(partition)]
        if flex:
            parts.append(b"\x00")
    if flex:
        parts.append(b"\x00")
    return b"".join(parts)


def response_head(correlation_id: int, version: int) -> bytes:
    return response_header(correlation_id, flexible(version))


def decode_response(body: bytes, version: int) -> tuple[int, list[tuple[str, int]]]:
    """(error_code, remaining partitions) of a response body (after the response header)."""
    flex = flexible(version)
    try:
        (code,) = struct.unpack_from(">h", body, 0)
        pos = 2
        if flex:
            n, pos = read_uvarint(body, pos)
            n -= 1
        else:
            (n,) = _I32.unpack_from(body, pos)
            pos += 4
        out = []
        for _ in range(max(n, 0)):
            if flex:
                size, pos = read_uvarint(body, pos)
                size -= 1
            else:
                (size,) = struct.unpack_from(">h", body, pos)
                pos += 2
            topic = bytes(body[pos:pos + size]).decode()
            pos += size
            out.append((topic, _I32.unpack_from(body, pos)[0]))
            pos += 4
            if flex:
                pos = _skip_tags(body, pos)
        return code, out
    except (struct.error, IndexError, ValueError, UnicodeDecodeError):
        raise MalformedRequest(f"ControlledShutdownResponse v{version} truncated") from None


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos
