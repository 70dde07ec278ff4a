# A structural pre-check of flexible request bodies, run before kio decodes them.
#
# Why: kio's native reader preallocates a compact array from its declared length, so a
# request declaring ~2^32 elements makes it allocate tens of GB, and the allocation failure
# aborts the whole process (no exception to catch). This walker follows the same schema
# (kio's dataclass metadata), checks that every array, string and bytes length fits in the
# bytes that remain, and raises MalformedRequest otherwise. It decodes nothing: plans are
# compiled once per request class into nested tuples of small opcodes.
from __future__ import annotations

from dataclasses import fields
from functools import cache

from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveField,
                                    PrimitiveTupleField, classify_field, get_field_tag)

from .errors import MalformedRequest
from .primitives import read_uvarint

_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2,
          "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8,
          "float64": 8, "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16}
_VARLEN = {"string", "bytes", "records"}

# Opcodes: ("f", n) fixed bytes; ("v",) variable-length string/bytes; ("a", elem) array of
# elem; ("e", plan, nullable) nested entity; plan = (ops tuple, tagged {tag: op} or None).


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


def _prim_op(kafka_type: str) -> tuple:
    if kafka_type in _FIXED:
        return ("f", _FIXED[kafka_type])
    if kafka_type in _VARLEN:
        return ("v",)
    raise _Bad(f"unknown type {kafka_type}")


@cache
def plan(cls: type) -> tuple:
    """(ops, tagged ops by tag or None, flexible, minimum encoded size)."""
    flexible = bool(getattr(cls, "__flexible__", False))
    ops: list[tuple] = []
    tagged: dict[int, tuple] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            op = _prim_op(f.metadata["kafka_type"])
        elif isinstance(kind, PrimitiveTupleField):
            op = _array(_prim_op(f.metadata["kafka_type"]))
        elif isinstance(kind, EntityField):
            op = _entity(plan(kind.type_), "None" in str(f.type))
        elif isinstance(kind, EntityTupleField):
            op = _array(_entity(plan(kind.type_), False))
        else:  # pragma: no cover
            raise _Bad(f"unclassified field {f.name}")
        tag = get_field_tag(f)
        if tag is not None:
            tagged[tag] = op
        elif op[0] == "f" and ops and ops[-1][0] == "f":
            ops[-1] = ("f", ops[-1][1] + op[1])  # one skip for a run of fixed fields
        else:
            ops.append(op)
    minimum = sum(_min(op) for op in ops) + (1 if flexible else 0)
    return tuple(ops), (tagged if flexible else None), flexible, minimum


def _min(op: tuple) -> int:
    return op[1] if op[0] == "f" else (1 if op[0] in ("v", "a") else op[3])


def _array(elem: tuple) -> tuple:
    return ("a", elem, _min(elem))


def _entity(p: tuple, nullable: bool) -> tuple:
    return ("e", p, nullable, 1 if nullable else p[3])


def _walk_op(op: tuple, buf: bytes, pos: int, end: int) -> int:
    kind = op[0]
    if kind == "f":
        pos += op[1]
    elif kind == "v":
        n, pos = _uvarint(buf, pos, end)
        if n > 1:
            pos += n - 1
    elif kind == "a":
        n, pos = _uvarint(buf, pos, end)
        n -= 1
        if n > 0:
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
                    pos = _walk_op(elem, buf, pos, end)
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
    ops, tagged, _flexible, _min_size = p
    for op in ops:
        if op[0] == "f":
            pos += op[1]
        else:
            pos = _walk_op(op, buf, pos, end)
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
            _walk_op(op, buf, pos, stop)
        pos = stop
    return pos


def check_flexible_body(cls: type, buf: bytes, pos: int) -> None:
    """Raise MalformedRequest if any length in a flexible request body overruns it."""
    try:
        _walk_plan(plan(cls), buf, pos, len(buf))
    except (_Bad, IndexError) as e:
        raise MalformedRequest(f"{cls.__name__} v{cls.__version__}: {e}") from None
