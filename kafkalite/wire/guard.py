# A structural pre-check of request bodies, run before kio decodes them.
#
# Why: kio's native reader preallocates a compact array from its declared length, so a
# request declaring ~2^32 elements makes it allocate tens of GB, and the allocation failure
# aborts the whole process (no exception to catch); and it decodes a null where the schema
# forbids one as None, which a handler would then trip over. This walker follows the same
# schema (kio's dataclass metadata), checks that every array, string and bytes length fits
# in the bytes that remain and that nulls appear only where they may, and raises
# MalformedRequest otherwise. It decodes nothing: plans are compiled once per request class
# into nested tuples of small opcodes.
from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache

from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveField,
                                    PrimitiveTupleField, classify_field, get_field_tag)

from .errors import MalformedRequest
from .primitives import read_uvarint

_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2,
          "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8,
          "float64": 8, "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Opcodes: ("f", n) fixed bytes; ("s", nullable) string; ("b", nullable) bytes/records;
# ("a", elem, elem min size, nullable) array; ("e", plan, nullable, min size) entity.
# A plan is (ops, tagged ops by tag or None, flexible, min size).


class _Bad(Exception):
    pass


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(buf, pos)
    except ValueError as e:
        raise _Bad(str(e)) from None
    if pos > end:
        raise _Bad("varint runs past its field")
    return value, pos


def _prim_op(kafka_type: str, nullable: bool) -> tuple:
    if kafka_type in _FIXED:
        return ("f", _FIXED[kafka_type])
    if kafka_type == "string":
        return ("s", nullable)
    if kafka_type in ("bytes", "records"):
        return ("b", nullable)
    raise _Bad(f"unknown type {kafka_type}")


def _is_nullable(f) -> bool:
    return "None" in str(f.type)


@cache
def plan(cls: type) -> tuple:
    flexible = bool(getattr(cls, "__flexible__", False))
    ops: list[tuple] = []
    tagged: dict[int, tuple] = {}
    for f in fields(cls):
        kind = classify_field(f)
        nullable = _is_nullable(f)
        if isinstance(kind, PrimitiveField):
            op = _prim_op(f.metadata["kafka_type"], nullable)
        elif isinstance(kind, PrimitiveTupleField):
            op = _array(_prim_op(f.metadata["kafka_type"], False), nullable, flexible)
        elif isinstance(kind, EntityField):
            op = _entity(plan(kind.type_), nullable)
        elif isinstance(kind, EntityTupleField):
            op = _array(_entity(plan(kind.type_), False), nullable, flexible)
        else:  # pragma: no cover
            raise _Bad(f"unclassified field {f.name}")
        tag = get_field_tag(f)
        if tag is not None:
            tagged[tag] = op
        elif op[0] == "f" and ops and ops[-1][0] == "f":
            ops[-1] = ("f", ops[-1][1] + op[1])  # one skip for a run of fixed fields
        else:
            ops.append(op)
    minimum = sum(_min(op, flexible) for op in ops) + (1 if flexible else 0)
    return tuple(ops), (tagged if flexible else None), flexible, minimum


def _min(op: tuple, flexible: bool) -> int:
    kind = op[0]
    if kind == "f":
        return op[1]
    if kind == "e":
        return op[3]
    if flexible:
        return 1
    return 2 if kind == "s" else 4


def _array(elem: tuple, nullable: bool, flexible: bool) -> tuple:
    return ("a", elem, _min(elem, flexible), nullable)


def _entity(p: tuple, nullable: bool) -> tuple:
    return ("e", p, nullable, 1 if nullable else p[3])


def _length(buf: bytes, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length prefix; -1 means null."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    st = _I32 if wide else _I16
    if pos + st.size > end:
        raise _Bad("truncated length")
    return st.unpack_from(buf, pos)[0], pos + st.size


def _walk_op(op: tuple, buf: bytes, pos: int, end: int, flexible: bool) -> int:
    kind = op[0]
    if kind == "f":
        pos += op[1]
    elif kind == "s" or kind == "b":
        n, pos = _length(buf, pos, end, flexible, kind == "b")
        if n < 0:
            if n != -1 or not op[1]:
                raise _Bad("null or negative length where the schema forbids it")
        else:
            pos += n
    elif kind == "a":
        n, pos = _length(buf, pos, end, flexible, True)
        if n < 0:
            if n != -1 or not op[3]:
                raise _Bad("null or negative array length where the schema forbids it")
        elif n:
            elem = op[1]
            if n * op[2] > end - pos:
                raise _Bad(f"array of {n} elements in {end - pos} bytes")
            if elem[0] == "f":
                pos += n * elem[1]
            elif elem[0] == "e" and not elem[2]:
                p = elem[1]
                for _ in range(n):
                    pos = _walk_plan(p, buf, pos, end)
            else:
                for _ in range(n):
                    pos = _walk_op(elem, buf, pos, end, flexible)
    else:  # "e"
        if op[2]:
            if pos >= end:
                raise _Bad("truncated")
            pos += 1
            if buf[pos - 1] == 0xFF:
                return pos
        pos = _walk_plan(op[1], buf, pos, end)
    if pos > end:
        raise _Bad("field runs past the end of the request")
    return pos


def _walk_plan(p: tuple, buf: bytes, pos: int, end: int) -> int:
    ops, tagged, flexible, _minimum = p
    for op in ops:
        if op[0] == "f":
            pos += op[1]
        else:
            pos = _walk_op(op, buf, pos, end, flexible)
    if not flexible:
        if pos > end:
            raise _Bad("field runs past the end of the request")
        return pos
    if pos >= end:
        raise _Bad("truncated before the tagged fields")
    count = buf[pos]
    if count < 0x80:
        pos += 1
    else:
        count, pos = _uvarint(buf, pos, end)
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise _Bad("tagged field runs past the end of the request")
        op = tagged.get(tag) if tagged else None
        if op is not None:
            _walk_op(op, buf, pos, stop, flexible)
        pos = stop
    return pos


def check_body(cls: type, buf: bytes, pos: int) -> None:
    """Raise MalformedRequest if a length in a request body overruns it or a null appears
    where the schema does not allow one."""
    try:
        _walk_plan(plan(cls), buf, pos, len(buf))
    except (_Bad, IndexError) as e:
        raise MalformedRequest(f"{cls.__name__} v{cls.__version__}: {e}") from None
