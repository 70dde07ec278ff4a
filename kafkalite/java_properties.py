# The text format of java.util.Properties.load, which Kafka reads server.properties with
# (Utils.loadProps: Properties.load(InputStream), so the bytes are ISO-8859-1).
#
# Natural lines end at \n, \r or \r\n. Lines blank or starting (after whitespace) with # or !
# are skipped; a comment never continues. A line ending in an odd number of backslashes
# continues on the next, whose leading whitespace is dropped. The key runs to the first
# unescaped '=', ':' or whitespace; whitespace, then one '=' or ':', then whitespace, separate
# it from the value, whose trailing whitespace stays. In keys and values \t \n \r \f are
# those characters, \uXXXX a UTF-16 unit (a bad one is an error, as Java's
# IllegalArgumentException), and a backslash before anything else stands for that character.
# Later keys replace earlier ones.
from __future__ import annotations

import re
from typing import Iterator

WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = set("0123456789abcdefABCDEF")


class PropertiesError(ValueError):
    pass


def parse(text: str) -> dict[str, str]:
    """The key/value pairs of a .properties text, as Properties.load reads them."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> Iterator[str]:
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        s = natural.lstrip(WHITESPACE)
        if pending is None and (not s or s[0] in "#!"):
            continue
        trailing = len(s) - len(s.rstrip("\\"))
        if trailing % 2:
            pending = (pending or "") + s[:-1]
            continue
        yield (pending or "") + s
        pending = None
    if pending:  # continued past the end of the file: the backslash is dropped
        yield pending


def _split(line: str) -> tuple[str, str]:
    escaped = False
    end = len(line)
    for i, c in enumerate(line):
        if not escaped and (c in "=:" or c in WHITESPACE):
            end = i
            break
        escaped = c == "\\" and not escaped
    rest = line[end:].lstrip(WHITESPACE)
    if rest[:1] in ("=", ":") and rest:
        rest = rest[1:].lstrip(WHITESPACE)
    return line[:end], rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\" or i == n:
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) < 4 or not set(digits) <= _HEX:
                raise PropertiesError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    # \uXXXX escapes are UTF-16 units: pair the surrogates they may spell
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le",
                                                                     "surrogatepass")
