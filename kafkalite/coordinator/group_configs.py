# Dynamic group configs (the GROUP config resource, KIP-848/KIP-932), as Kafka 4.0's
# GroupConfig: six names, INT/STRING typed, each default taken from the broker's group
# coordinator setting of the same meaning, validated with Kafka's bounds and messages
# (GroupConfig.validateValues) against the whole resulting set of a group's overrides.
#
# They tune KIP-848 consumer groups (consumer_group_coordinator.py reads the two consumer.*
# ones at each heartbeat) and share groups; classic groups ignore them, as in Kafka. Stored
# durably in .kafkalite/group-configs.json, written atomically (Kafka keeps them in its
# metadata log). The consumer.* ones are checked against the broker's
# group.consumer.min/max.* settings, and default to its group.consumer.* ones, when validate
# is given the broker's config.
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from ..fileio import atomic_write

log = logging.getLogger("kafkalite.groups")

STATE_FILE = "group-configs.json"


@dataclass(frozen=True)
class GroupProp:
    name: str
    type: str  # "int" or "string"
    default: int | str
    at_least: int | None
    choices: tuple[str, ...]
    doc: str


# GroupCoordinatorConfig / ShareGroupConfig defaults (Kafka 4.0), for when no broker config
# is at hand; a broker's group.consumer.* / group.share.* settings (BROKER_DEFAULTS) replace
# them, as Kafka 4.x's GroupConfig defaults come from the broker's config.
PROPS: dict[str, GroupProp] = {p.name: p for p in (
    GroupProp("consumer.heartbeat.interval.ms", "int", 5000, 1, (),
              "The heartbeat interval given to the members of a consumer group."),
    GroupProp("consumer.session.timeout.ms", "int", 45000, 1, (),
              "The timeout to detect client failures when using the consumer group protocol."),
    GroupProp("share.auto.offset.reset", "string", "latest", None, ("latest", "earliest"),
              "The strategy to initialize the share-partition start offset."),
    GroupProp("share.isolation.level", "string", "read_uncommitted", None,
              ("read_committed", "read_uncommitted"),
              "Controls how to read records written transactionally. If set to "
              "\"read_committed\", the share group will only deliver transactional records "
              "which have been committed. If set to \"read_uncommitted\", the share group "
              "will deliver all transactional records, including aborted ones."),
    GroupProp("share.heartbeat.interval.ms", "int", 5000, 1, (),
              "The heartbeat interval given to the members of a share group."),
    GroupProp("share.record.lock.duration.ms", "int", 30000, 1000, (),
              "The record acquisition lock duration in milliseconds for share groups."),
    GroupProp("share.session.timeout.ms", "int", 45000, 1, (),
              "The timeout to detect client failures when using the share group protocol."),
)}

# (config, broker setting bounding it from below, from above, those bounds' defaults)
BOUNDS = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms", 5000, 15000),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
     "group.consumer.max.session.timeout.ms", 45000, 60000),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
     "group.share.max.heartbeat.interval.ms", 5000, 15000),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms",
     "group.share.max.session.timeout.ms", 45000, 60000),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms", 15000, 60000),
)


class GroupConfigError(ValueError):
    """An invalid group config set; the message is Kafka's (INVALID_CONFIG)."""


def _parse(p: GroupProp, raw: str) -> int | str:
    """ConfigDef.parseType and its validator, with ConfigException's wording."""
    text = raw.strip()
    if p.type == "int":
        try:
            value: int | str = int(text)
        except ValueError:
            raise GroupConfigError(f"Invalid value {raw} for configuration {p.name}: "
                                   "Not a number of type INT") from None
        if not -2**31 <= value < 2**31:  # type: ignore[operator]
            raise GroupConfigError(f"Invalid value {raw} for configuration {p.name}: "
                                   "Not a number of type INT")
        if p.at_least is not None and value < p.at_least:  # type: ignore[operator]
            raise GroupConfigError(f"Invalid value {value} for configuration {p.name}: "
                                   f"Value must be at least {p.at_least}")
        return value
    if p.choices and text not in p.choices:
        raise GroupConfigError(f"Invalid value {text} for configuration {p.name}: String "
                               f"must be one of: {', '.join(p.choices)}")
    return text


# The broker settings the group configs default to (GroupConfig's defaults).
BROKER_DEFAULTS = {
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
}


def _setting(broker: Any, name: str, fallback: Any) -> Any:
    """The broker's setting `name`, if it has one (kafkalite has no
    group.share.min/max.session.timeout.ms or heartbeat bounds: Kafka's defaults stand)."""
    if broker is None:
        return fallback
    try:
        return broker[name]
    except KeyError:
        return fallback


def defaults(broker: Any = None) -> dict[str, int | str]:
    """Each group config's value for a group that does not override it."""
    return {n: _setting(broker, BROKER_DEFAULTS[n], p.default) if n in BROKER_DEFAULTS
            else p.default for n, p in PROPS.items()}


def validate(overrides: dict[str, str], broker: Any = None) -> None:
    """GroupConfig.validate: names, then values, then the cross-checks; raises
    GroupConfigError with Kafka's message. `broker`: the broker's config, whose
    group.consumer.* / group.share.* settings bound and default the group configs."""
    def setting(name: str, fallback: Any) -> Any:
        return _setting(broker, name, fallback)
    for name in overrides:
        if name not in PROPS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    base = defaults(broker)
    values = {n: (_parse(p, overrides[n]) if n in overrides else base[n])
              for n, p in PROPS.items()}
    for name, low_name, high_name, low, high in BOUNDS:
        if name not in overrides:
            # A broker default: Kafka checks it against these bounds at startup, kafkalite
            # lacks some of them (group.share.min/max.session.timeout.ms...).
            continue
        if values[name] < setting(low_name, low):  # type: ignore[operator]
            raise GroupConfigError(f"{name} must be greater than or equal to {low_name}")
        if values[name] > setting(high_name, high):  # type: ignore[operator]
            raise GroupConfigError(f"{name} must be less than or equal to {high_name}")
    for kind in ("consumer", "share"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:  # type: ignore[operator]
            raise GroupConfigError(f"{kind}.session.timeout.ms must be greater than "
                                   f"{kind}.heartbeat.interval.ms")


class GroupConfigs:
    """Every group's overrides, persisted under `state_dir` on each change."""

    def __init__(self, state_dir: str):
        self.path = os.path.join(state_dir, STATE_FILE)
        self.groups: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                state = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            log.error("Ignoring the group configs in %s: %s", self.path, e)
            return
        for group, overrides in state.items():
            try:
                validate(overrides)
            except GroupConfigError as e:
                log.error("Ignoring the configs of group %s: %s", group, e)
                continue
            self.groups[group] = {k: str(v) for k, v in overrides.items()}

    def get(self, group: str) -> dict[str, str]:
        return dict(self.groups.get(group, {}))

    def set(self, group: str, overrides: dict[str, str]) -> None:
        """Replace a group's overrides (already validated); raises OSError."""
        state = dict(self.groups)
        if overrides:
            state[group] = dict(overrides)
        else:
            state.pop(group, None)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        atomic_write(self.path, json.dumps(state, indent=1, sort_keys=True).encode())
        self.groups = state
