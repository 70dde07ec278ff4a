# Hand-written encoders for the protocol primitives used by the hot-path response encoders.
# kio's writer is pure Python; these are the few pieces Produce/Fetch need, kept tiny.
from __future__ import annotations

import struct

_H = struct.Struct(">h")
_I = struct.Struct(">i")

pack_i16 = _H.pack
pack_i32 = _I.pack
pack_i64 = struct.Struct(">q").pack


def uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Returns (value, new_pos); raises IndexError/ValueError on truncation or overflow."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
        if shift > 28:
            raise ValueError("varint too long")


def string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else _H.pack(len(b))) + b


def array_len(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I.pack(n)


def bytes_len(n: int | None, flexible: bool) -> bytes:
    """Length prefix for a (nullable) bytes/records field."""
    if n is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return uvarint(n + 1) if flexible else _I.pack(n)


EMPTY_TAGS = b"\x00"
