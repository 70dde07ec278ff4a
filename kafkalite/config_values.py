# Parsing and checking one configuration value, with the messages Kafka's ConfigDef gives
# ("Invalid value x for configuration message.max.bytes: Not a number of type INT"), shared
# by the broker properties (config.py) and the topic configs (topic_config.py).
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that stops the broker from starting, or that an admin request
    is refused for."""


def _parse_bool(v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError("Expected value to be either true or false")


def _number(kind: str, convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(v: str) -> Any:
        try:
            return convert(str(v).strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
    return parse


def _parse_str(v: str) -> str:
    return str(v).strip()


def _parse_list(v: str) -> str:
    """A list as Kafka reads it: items trimmed, joined by commas ("" is the empty list)."""
    s = str(v).strip()
    return ",".join(item.strip() for item in s.split(",")) if s else ""


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": _number("INT", int),
    "short": _number("SHORT", int),
    "long": _number("LONG", int),
    "boolean": _parse_bool,
    "string": _parse_str,
    "list": _parse_list,
    "double": _number("DOUBLE", float),
    "password": _parse_str,
    "class": _parse_str,
}


@dataclass(frozen=True)
class Check:
    """A validator: `check(value)` is True when valid; `explain(value)` is Kafka's message
    and `shown(value)` the value that message names."""
    ok: Callable[[Any], bool]
    reason: str
    explain_fn: Callable[[Any], str] | None = None
    shown: Callable[[Any], Any] = lambda v: v

    def __call__(self, value: Any) -> bool:
        return self.ok(value)

    def explain(self, value: Any) -> str:
        return self.explain_fn(value) if self.explain_fn is not None else self.reason


def at_least(n: int) -> Check:
    return Check(lambda v: v >= n, f"Value must be at least {n}")


def between(lo: float, hi: float) -> Check:
    """ConfigDef.Range.between: the message names the bound that was crossed."""
    return Check(lambda v: lo <= v <= hi, f"Value must be between {lo} and {hi}",
                 lambda v: f"Value must be at least {lo}" if v < lo
                 else f"Value must be no more than {hi}")


def one_of(*options: str) -> Check:
    return Check(lambda v: v in options, "String must be one of: " + ", ".join(options))


def list_of(*options: str) -> Check:
    """ConfigDef.ValidList: an empty list is valid, an empty item is not; the message names
    the first bad item."""
    def items(v: str) -> list[str]:
        return [i.strip() for i in v.split(",")] if v.strip() else []

    def first_bad(v: str) -> str:
        return next((i for i in items(v) if i not in options), v)
    return Check(lambda v: all(i in options for i in items(v)),
                 "String must be one of: " + ", ".join(options), shown=first_bad)


def parse_value(name: str, kind: str, raw: Any, check: Check | None) -> Any:
    """The typed value of `raw` for a config of type `kind`; raises ConfigError with Kafka's
    message."""
    try:
        value = raw if not isinstance(raw, str) else PARSERS[kind](raw)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"Invalid value {raw} for configuration {name}: {e}") from None
    if check is not None and not check(value):
        raise ConfigError(f"Invalid value {check.shown(value)} for configuration {name}: "
                          f"{check.explain(value)}")
    return value


def format_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
