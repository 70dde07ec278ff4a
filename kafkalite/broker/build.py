# Building kio response entities for any version from one set of keyword arguments:
# fields a version lacks are dropped, so a handler is written once for all its versions.
from __future__ import annotations

import datetime
import sys
from functools import cache
from types import ModuleType
from typing import Any, Callable, Iterable

from ..wire.codec import response_class

ZERO = datetime.timedelta(0)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return sys.modules[response_class(api_key, version).__module__]


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(cls.__dataclass_fields__)


def make(cls: type, **kwargs: Any) -> Any:
    names = _field_names(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def to_ms(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def per_partition(topics: Iterable[Any], name_field: str, answer: Callable[[str, Any], Any],
                  make_topic: Callable[[str, tuple], Any]) -> tuple:
    """Answer the common topics -> partitions request shape: answer(topic name, requested
    partition) builds each partition's entry, make_topic(name, entries) each topic's."""
    out = []
    for t in topics:
        name = getattr(t, name_field)
        out.append(make_topic(name, tuple(answer(name, rp) for rp in t.partitions)))
    return tuple(out)
