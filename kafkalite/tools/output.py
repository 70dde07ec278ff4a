# Rendering for the operator commands: aligned text tables for people, JSON for scripts,
# and the escaping of record keys/values that are usually text but may be any bytes
# (non-UTF-8 bytes as \xNN, control characters as \n, \x01, ...; long ones cut).
from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Sequence, TextIO


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
          out: TextIO | None = None) -> None:
    """Print rows under upper-case headers, columns padded to the widest cell."""
    out = out or sys.stdout
    cells = [[cell_text(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out.write(fmt.format(*headers).rstrip() + "\n")
    for row in cells:
        out.write(fmt.format(*row).rstrip() + "\n")


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(cell_text(v) for v in value)
    return str(value)


def emit_json(obj: Any, out: TextIO | None = None, lines: bool = False) -> None:
    """One JSON document (indented), or with lines=True one compact document per line."""
    out = out or sys.stdout
    if lines:
        out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        out.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def decode_bytes(data: bytes | None) -> str | None:
    """UTF-8 text, with bytes that are not valid UTF-8 shown as \\xNN escapes."""
    if data is None:
        return None
    return data.decode("utf-8", "backslashreplace")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """Non-printable characters (newlines, control bytes) as backslash escapes."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def cut(text: str, limit: int | None, size: int) -> str:
    """`text` cut after `limit` characters, ending in '... (N bytes)' with N the full size."""
    if limit is not None and len(text) > limit:
        return f"{text[:limit]}... ({size} bytes)"
    return text

