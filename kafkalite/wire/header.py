# Request and response headers, parsed and built by hand because every request pays for them.
#
# Request header v1: api_key i16, api_version i16, correlation_id i32, client_id nullable
# string (i16 length). v2 (flexible request versions) appends tagged fields; note that
# client_id stays a non-compact string even in v2. Response header v0 is the correlation id;
# v1 adds an empty tagged-field section. ApiVersions always answers with header v0.
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import MalformedRequest
from .primitives import read_uvarint

_HDR = struct.Struct(">hhih")
_CORR = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_fixed(frame: bytes) -> tuple[int, int, int, str | None, int]:
    """Parse the v1 part of the header: (api_key, api_version, correlation_id, client_id, pos)."""
    if len(frame) < 10:
        raise MalformedRequest(f"request header truncated ({len(frame)} bytes)")
    api_key, api_version, corr, clen = _HDR.unpack_from(frame, 0)
    pos = 10
    client_id = None
    if clen >= 0:
        end = pos + clen
        if end > len(frame):
            raise MalformedRequest("client_id runs past the end of the frame")
        try:
            client_id = bytes(frame[pos:end]).decode()
        except UnicodeDecodeError:
            raise MalformedRequest("client_id is not valid UTF-8") from None
        pos = end
    elif clen != -1:
        raise MalformedRequest(f"invalid client_id length {clen}")
    return api_key, api_version, corr, client_id, pos


def skip_tagged_fields(frame: bytes, pos: int) -> int:
    try:
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            pos += size
    except (IndexError, ValueError):
        raise MalformedRequest("truncated tagged fields in request header") from None
    if pos > len(frame):
        raise MalformedRequest("tagged fields run past the end of the frame")
    return pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    return _CORR.pack(correlation_id) + (b"\x00" if flexible else b"")
