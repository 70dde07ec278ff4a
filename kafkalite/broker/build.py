# Building kio response entities for any version from one set of keyword arguments:
# fields a version lacks are dropped, so a handler is written once for all its versions.
from __future__ import annotations

import datetime
import sys
from functools import cache
from types import ModuleType
from typing import Any

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
