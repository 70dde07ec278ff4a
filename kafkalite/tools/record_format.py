# How `kafkalite consume` renders one record: kcat's -f format strings, the key/value
# encodings (utf8, hex, base64) and the null marker.
#
# Format string (kcat's -f): %t topic, %p partition, %o offset, %k key, %s value,
# %K / %S key / value length in bytes (-1 for null), %R value length as a 4-byte big-endian
# integer, %T timestamp in ms (-1 when absent), %h headers as k=v,k=v, %% a percent sign;
# escapes \n \r \t \\ and \xHH. A format is compiled once into a list of parts, so each
# record costs one pass over the parts.
#
# Null rule (kcat's): a null key or value prints as the null marker, empty by default, so
# that the value "null" and a null value never look alike; -Z makes the marker NULL. The
# length fields always tell them apart (-1 for null, 0 for empty). --json prints null.
from __future__ import annotations

import struct
from typing import Callable

ENCODINGS = ("utf8", "hex", "base64")
_LENGTH = struct.Struct(">i")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


class FormatError(ValueError):
    """A format string that cannot be compiled; the message names the bad part."""


def encoder(name: str) -> Callable[[bytes], str]:
    """bytes -> text in one of ENCODINGS; utf8 shows bytes that are not UTF-8 as \\xNN."""
    if name == "hex":
        return bytes.hex
    if name == "base64":
        import base64
        return lambda data: base64.b64encode(data).decode("ascii")
    return lambda data: data.decode("utf-8", "backslashreplace")


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x":
            try:
                out.append(chr(int(text[i + 2:i + 4], 16)))
            except ValueError:
                raise FormatError(f"\\x needs two hex digits at position {i}") from None
            i += 4
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def compile_format(fmt: str, key_text: Callable[[bytes], str],
                   value_text: Callable[[bytes], str], null: str) -> Callable[[object], bytes]:
    """A function record -> output bytes for a kcat-style format string."""
    def shown(data: bytes | None, text: Callable[[bytes], str]) -> bytes:
        return null.encode() if data is None else text(data).encode("utf-8")

    fields: dict[str, Callable[[object], bytes]] = {
        "t": lambda r: r.topic.encode(),
        "p": lambda r: b"%d" % r.partition,
        "o": lambda r: b"%d" % r.offset,
        "k": lambda r: shown(r.key, key_text),
        "s": lambda r: shown(r.value, value_text),
        "K": lambda r: b"%d" % (-1 if r.key is None else len(r.key)),
        "S": lambda r: b"%d" % (-1 if r.value is None else len(r.value)),
        "R": lambda r: _LENGTH.pack(-1 if r.value is None else len(r.value)),
        "T": lambda r: b"%d" % (r.timestamp if r.timestamp is not None else -1),
        "h": lambda r: ",".join(f"{k}={_utf8(v)}" for k, v in r.headers or ()).encode(),
    }
    parts: list[bytes | Callable[[object], bytes]] = []
    literal: list[str] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            literal.append(ch)
            i += 1
            continue
        code = fmt[i + 1:i + 2]
        if code == "%":
            literal.append("%")
        elif code in fields:
            if literal:
                parts.append(_unescape("".join(literal)).encode("utf-8"))
                literal = []
            parts.append(fields[code])
        else:
            raise FormatError(f"unsupported formatter %{code} at position {i} "
                              f"(known: %t %p %o %k %s %K %S %R %T %h %%)")
        i += 2
    if literal:
        parts.append(_unescape("".join(literal)).encode("utf-8"))

    def render(record) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in parts)
    return render


def _utf8(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "backslashreplace")

