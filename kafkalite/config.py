# Broker configuration under Apache Kafka's property names.
#
# Sources, later wins: built-in defaults < server.properties < KAFKALITE_* environment
# variables < --set key=value. An unknown property warns (Kafka logs "not a known config");
# an invalid value raises ConfigError, which the CLI turns into exit code 2.
# Most of this module is Kafka's property tables (broker and topic), kept together so that
# DescribeConfigs, validation and the defaults read one source; hence its length.
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

log = logging.getLogger("kafkalite.config")

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that stops the broker from starting."""


def _parse_bool(v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _parse_int(v: str) -> int:
    return int(str(v).strip())


def _parse_str(v: str) -> str:
    return str(v).strip()


def _parse_float(v: str) -> float:
    return float(str(v).strip())


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": _parse_int,
    "long": _parse_int,
    "boolean": _parse_bool,
    "string": _parse_str,
    "list": _parse_str,
    "double": _parse_float,
    "password": _parse_str,
    "class": _parse_str,
}


@dataclass(frozen=True)
class Prop:
    name: str
    type: str  # Kafka's ConfigType names: int, long, boolean, string, list, double
    default: Any
    check: Callable[[Any], bool] | None = None
    doc: str = ""
    sensitive: bool = False
    read_only: bool = True


def _at_least(n: int) -> Callable[[Any], bool]:
    return lambda v: v >= n


def _one_of(*options: str) -> Callable[[Any], bool]:
    return lambda v: v in options


BROKER_PROPS: list[Prop] = [
    Prop("node.id", "int", 1, _at_least(0), "Broker id (keep it small: librdkafka assumes so)."),
    Prop("broker.id", "int", -1, None, "Alias of node.id kept for old configs."),
    Prop("listeners", "list", "PLAINTEXT://localhost:9092"),
    Prop("advertised.listeners", "list", None),
    Prop("log.dirs", "list", None),
    Prop("log.dir", "string", "./data"),
    Prop("cluster.id", "string", None, None, "Cluster id; generated and persisted when unset."),
    Prop("num.partitions", "int", 1, _at_least(1), read_only=False),
    Prop("default.replication.factor", "int", 1, _at_least(1), read_only=False),
    Prop("auto.create.topics.enable", "boolean", True),
    Prop("delete.topic.enable", "boolean", True),
    Prop("log.segment.bytes", "int", 1073741824, _at_least(14), read_only=False),
    Prop("log.roll.ms", "long", None, read_only=False),
    Prop("log.roll.hours", "int", 168, _at_least(1)),
    Prop("log.roll.jitter.ms", "long", None),
    Prop("log.roll.jitter.hours", "int", 0, _at_least(0)),
    Prop("log.retention.ms", "long", None, read_only=False),
    Prop("log.retention.minutes", "int", None),
    Prop("log.retention.hours", "int", 168),
    Prop("log.retention.bytes", "long", -1, read_only=False),
    Prop("log.retention.check.interval.ms", "long", 300000, _at_least(1)),
    Prop("log.segment.delete.delay.ms", "long", 60000, _at_least(0)),
    Prop("log.flush.interval.messages", "long", LONG_MAX, _at_least(1), read_only=False),
    Prop("log.flush.interval.ms", "long", None, read_only=False),
    Prop("log.flush.scheduler.interval.ms", "long", LONG_MAX),
    Prop("log.index.interval.bytes", "int", 4096, _at_least(0), read_only=False),
    Prop("log.index.size.max.bytes", "int", 10485760, _at_least(4), read_only=False),
    Prop("log.cleanup.policy", "list", "delete", read_only=False),
    Prop("log.cleaner.delete.retention.ms", "long", 86400000, read_only=False),
    Prop("log.cleaner.min.compaction.lag.ms", "long", 0, read_only=False),
    Prop("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, read_only=False),
    Prop("log.cleaner.min.cleanable.ratio", "double", 0.5, read_only=False),
    Prop("log.message.timestamp.type", "string", "CreateTime",
         _one_of("CreateTime", "LogAppendTime"), read_only=False),
    Prop("log.message.timestamp.before.max.ms", "long", LONG_MAX, _at_least(0), read_only=False),
    Prop("log.message.timestamp.after.max.ms", "long", 3600000, _at_least(0), read_only=False),
    Prop("log.preallocate", "boolean", False, read_only=False),
    Prop("log.local.retention.ms", "long", -2, read_only=False),
    Prop("log.local.retention.bytes", "long", -2, read_only=False),
    Prop("compression.type", "string", "producer",
         _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), read_only=False),
    Prop("compression.gzip.level", "int", -1, lambda v: v == -1 or 1 <= v <= 9, read_only=False),
    Prop("compression.lz4.level", "int", 9, lambda v: 1 <= v <= 17, read_only=False),
    Prop("compression.zstd.level", "int", 3, lambda v: -131072 <= v <= 22, read_only=False),
    Prop("message.max.bytes", "int", 1048588, _at_least(0), read_only=False),
    Prop("min.insync.replicas", "int", 1, _at_least(1), read_only=False),
    Prop("unclean.leader.election.enable", "boolean", False, read_only=False),
    Prop("socket.request.max.bytes", "int", 104857600, _at_least(1)),
    Prop("socket.send.buffer.bytes", "int", 102400),
    Prop("socket.receive.buffer.bytes", "int", 102400),
    Prop("max.connections", "int", 2147483647, _at_least(0), read_only=False),
    Prop("max.connections.per.ip", "int", 2147483647, _at_least(0), read_only=False),
    Prop("connections.max.idle.ms", "long", 600000),
    Prop("queued.max.requests", "int", 500, _at_least(1)),
    Prop("queued.max.request.bytes", "long", -1),
    Prop("max.incremental.fetch.session.cache.slots", "int", 1000, _at_least(0)),
    Prop("num.network.threads", "int", 3, read_only=False),
    Prop("num.io.threads", "int", 8, read_only=False),
    Prop("offsets.topic.num.partitions", "int", 50, _at_least(1)),
    Prop("offsets.topic.replication.factor", "int", 1, _at_least(1)),
    Prop("offsets.retention.minutes", "int", 10080, _at_least(1)),
    Prop("offsets.retention.check.interval.ms", "long", 600000, _at_least(1)),
    Prop("offset.metadata.max.bytes", "int", 4096),
    Prop("transaction.state.log.replication.factor", "int", 1),
    Prop("transaction.state.log.min.isr", "int", 1),
    Prop("transactional.id.expiration.ms", "int", 604800000),
    Prop("producer.id.expiration.ms", "int", 86400000),
    Prop("group.initial.rebalance.delay.ms", "int", 3000, _at_least(0)),
    Prop("group.min.session.timeout.ms", "int", 6000, _at_least(0)),
    Prop("group.max.session.timeout.ms", "int", 1800000, _at_least(0)),
    Prop("group.max.size", "int", 2147483647, _at_least(1)),
    Prop("fetch.max.bytes", "int", 57671680, _at_least(0)),
    Prop("process.roles", "list", "broker,controller"),
    Prop("inter.broker.protocol.version", "string", "3.9-IV0"),
    # kafkalite's own settings (no Kafka equivalent).
    Prop("kafkalite.fsync.before.ack", "boolean", False, None,
         "fsync the partition before answering acks=all (durable on power loss; slower)."),
    Prop("kafkalite.metrics.port", "int", -1, None, "Prometheus endpoint port; -1 disables it."),
    Prop("kafkalite.produce.validate.records", "boolean", False, None,
         "Decompress and check every produced record as Kafka's LogValidator does "
         "(per-record work; off by default)."),
]

PROPS: dict[str, Prop] = {p.name: p for p in BROKER_PROPS}


@dataclass(frozen=True)
class TopicProp:
    name: str
    type: str
    synonym: str | None  # broker property supplying the default
    default: Any  # used when no broker synonym exists


TOPIC_PROPS: list[TopicProp] = [
    TopicProp("cleanup.policy", "list", "log.cleanup.policy", "delete"),
    TopicProp("compression.gzip.level", "int", "compression.gzip.level", -1),
    TopicProp("compression.lz4.level", "int", "compression.lz4.level", 9),
    TopicProp("compression.type", "string", "compression.type", "producer"),
    TopicProp("compression.zstd.level", "int", "compression.zstd.level", 3),
    TopicProp("delete.retention.ms", "long", "log.cleaner.delete.retention.ms", 86400000),
    TopicProp("file.delete.delay.ms", "long", "log.segment.delete.delay.ms", 60000),
    TopicProp("flush.messages", "long", "log.flush.interval.messages", LONG_MAX),
    TopicProp("flush.ms", "long", "log.flush.interval.ms", LONG_MAX),
    TopicProp("follower.replication.throttled.replicas", "list", None, ""),
    TopicProp("index.interval.bytes", "int", "log.index.interval.bytes", 4096),
    TopicProp("leader.replication.throttled.replicas", "list", None, ""),
    TopicProp("local.retention.bytes", "long", "log.local.retention.bytes", -2),
    TopicProp("local.retention.ms", "long", "log.local.retention.ms", -2),
    TopicProp("max.compaction.lag.ms", "long", "log.cleaner.max.compaction.lag.ms", LONG_MAX),
    TopicProp("max.message.bytes", "int", "message.max.bytes", 1048588),
    TopicProp("message.timestamp.after.max.ms", "long", "log.message.timestamp.after.max.ms",
              3600000),
    TopicProp("message.timestamp.before.max.ms", "long", "log.message.timestamp.before.max.ms",
              LONG_MAX),
    TopicProp("message.timestamp.type", "string", "log.message.timestamp.type", "CreateTime"),
    TopicProp("min.cleanable.dirty.ratio", "double", "log.cleaner.min.cleanable.ratio", 0.5),
    TopicProp("min.compaction.lag.ms", "long", "log.cleaner.min.compaction.lag.ms", 0),
    TopicProp("min.insync.replicas", "int", "min.insync.replicas", 1),
    TopicProp("preallocate", "boolean", "log.preallocate", False),
    TopicProp("remote.log.copy.disable", "boolean", None, False),
    TopicProp("remote.log.delete.on.disable", "boolean", None, False),
    TopicProp("remote.storage.enable", "boolean", None, False),
    TopicProp("retention.bytes", "long", "log.retention.bytes", -1),
    TopicProp("retention.ms", "long", "log.retention.ms", 604800000),
    TopicProp("segment.bytes", "int", "log.segment.bytes", 1073741824),
    TopicProp("segment.index.bytes", "int", "log.index.size.max.bytes", 10485760),
    TopicProp("segment.jitter.ms", "long", "log.roll.jitter.ms", 0),
    TopicProp("segment.ms", "long", "log.roll.ms", 604800000),
    TopicProp("unclean.leader.election.enable", "boolean", "unclean.leader.election.enable", False),
]

TOPIC_PROP_MAP: dict[str, TopicProp] = {p.name: p for p in TOPIC_PROPS}

_TOPIC_CHECKS: dict[str, Callable[[Any], bool]] = {
    "cleanup.policy": lambda v: set(v.split(",")) <= {"delete", "compact"} and v != "",
    "compression.type": PROPS["compression.type"].check,  # type: ignore[dict-item]
    "message.timestamp.type": PROPS["log.message.timestamp.type"].check,  # type: ignore[dict-item]
    "max.message.bytes": _at_least(0),
    "segment.bytes": _at_least(14),
    "retention.ms": _at_least(-1),
    "retention.bytes": _at_least(-1),
    "segment.ms": _at_least(1),
    "min.insync.replicas": _at_least(1),
    "index.interval.bytes": _at_least(0),
    "compression.gzip.level": PROPS["compression.gzip.level"].check,  # type: ignore[dict-item]
    "compression.lz4.level": PROPS["compression.lz4.level"].check,  # type: ignore[dict-item]
    "compression.zstd.level": PROPS["compression.zstd.level"].check,  # type: ignore[dict-item]
    # kafkalite has no tiered storage: Kafka refuses this when the broker has it disabled.
    "remote.storage.enable": lambda v: v is False,
}

# One-line documentation per topic config (DescribeConfigs v3+ include_documentation),
# paraphrasing the meaning Kafka documents for each.
TOPIC_DOCS: dict[str, str] = {
    "cleanup.policy": "Retention policy for old segments: delete, compact, or both.",
    "compression.gzip.level": "Compression level used when compression.type is gzip.",
    "compression.lz4.level": "Compression level used when compression.type is lz4.",
    "compression.type": "Final compression of the topic's data; producer keeps the "
                        "producer's codec.",
    "compression.zstd.level": "Compression level used when compression.type is zstd.",
    "delete.retention.ms": "How long delete tombstones are kept on compacted topics.",
    "file.delete.delay.ms": "Delay before a deleted segment's files are removed.",
    "flush.messages": "Force an fsync after this many messages.",
    "flush.ms": "Force an fsync after this many milliseconds.",
    "follower.replication.throttled.replicas": "Replicas whose follower replication is "
                                               "throttled.",
    "index.interval.bytes": "How often (in bytes) an offset index entry is added.",
    "leader.replication.throttled.replicas": "Replicas whose leader replication is throttled.",
    "local.retention.bytes": "Local size limit before tiered segments are deleted locally "
                             "(-2: use retention.bytes).",
    "local.retention.ms": "Local time limit before tiered segments are deleted locally "
                          "(-2: use retention.ms).",
    "max.compaction.lag.ms": "Longest time a message stays ineligible for compaction.",
    "max.message.bytes": "Largest record batch size accepted.",
    "message.timestamp.after.max.ms": "How far in the future a record timestamp may be.",
    "message.timestamp.before.max.ms": "How far in the past a record timestamp may be.",
    "message.timestamp.type": "CreateTime or LogAppendTime.",
    "min.cleanable.dirty.ratio": "Dirty-log ratio that triggers compaction.",
    "min.compaction.lag.ms": "Shortest time a message stays uncompacted.",
    "min.insync.replicas": "Replicas that must acknowledge an acks=all write.",
    "preallocate": "Preallocate segment files on disk.",
    "remote.log.copy.disable": "Stop copying segments to tiered storage.",
    "remote.log.delete.on.disable": "Delete tiered data when tiered storage is disabled.",
    "remote.storage.enable": "Enable tiered storage for the topic.",
    "retention.bytes": "Size limit of a partition before old segments are deleted (-1: none).",
    "retention.ms": "Time limit before old segments are deleted (-1: none).",
    "segment.bytes": "Segment file size.",
    "segment.index.bytes": "Offset index file size.",
    "segment.jitter.ms": "Random jitter subtracted from segment.ms.",
    "segment.ms": "Time after which a segment rolls even if not full.",
    "unclean.leader.election.enable": "Allow out-of-sync replicas to become leader.",
}


def parse_topic_value(name: str, raw: str) -> Any:
    """Parse and validate a topic config value; raises ConfigError (INVALID_CONFIG)."""
    prop = TOPIC_PROP_MAP.get(name)
    if prop is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    try:
        value = _PARSERS[prop.type](raw)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"Invalid value {raw} for configuration {name}: {e}") from None
    check = _TOPIC_CHECKS.get(name)
    if check is not None and not check(value):
        raise ConfigError(f"Invalid value {raw} for configuration {name}")
    return value


def format_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class BrokerConfig:
    """Resolved broker configuration: `cfg["log.segment.bytes"]` or typed helpers."""

    def __init__(self, overrides: Mapping[str, str] | None = None):
        self.explicit: dict[str, Any] = {}
        for key, raw in (overrides or {}).items():
            self.set(key, raw)

    def set(self, key: str, raw: Any) -> None:
        prop = PROPS.get(key)
        if prop is None:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
            self.explicit[key] = raw
            return
        if raw is None:
            self.explicit[key] = None
            return
        try:
            value = raw if not isinstance(raw, str) else _PARSERS[prop.type](raw)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"Invalid value {raw!r} for configuration {key}: {e}") from None
        if prop.check is not None and not prop.check(value):
            raise ConfigError(f"Invalid value {raw!r} for configuration {key}")
        self.explicit[key] = value

    def __getitem__(self, key: str) -> Any:
        if key in self.explicit:
            return self.explicit[key]
        return PROPS[key].default

    def is_explicit(self, key: str) -> bool:
        return key in self.explicit

    # Derived values, resolved the way Kafka's KafkaConfig resolves them.
    @property
    def node_id(self) -> int:
        if self.is_explicit("node.id"):
            return self["node.id"]
        bid = self["broker.id"]
        return bid if bid >= 0 else self["node.id"]

    @property
    def data_dir(self) -> str:
        dirs = self["log.dirs"]
        return (dirs.split(",")[0].strip() if dirs else self["log.dir"])

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] is not None:
            return self["log.retention.minutes"] * 60_000
        return self["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        v = self["log.flush.interval.ms"]
        return LONG_MAX if v is None else v

    def listener(self) -> tuple[str, int]:
        return parse_listener(self["listeners"])

    def advertised(self) -> tuple[str, int]:
        adv = self["advertised.listeners"]
        host, port = parse_listener(adv) if adv else self.listener()
        if host in ("", "0.0.0.0", "::"):
            host = "localhost"
        return host, port

    def topic_default(self, name: str) -> Any:
        """The broker-level default for a topic config (its synonym's value)."""
        prop = TOPIC_PROP_MAP[name]
        if name == "retention.ms":
            return self.retention_ms
        if name == "segment.ms":
            return self.roll_ms
        if name == "flush.ms":
            return self.flush_ms
        if name == "segment.jitter.ms":
            j = self["log.roll.jitter.ms"]
            return j if j is not None else self["log.roll.jitter.hours"] * 3_600_000
        if prop.synonym is not None and prop.synonym in PROPS:
            return self[prop.synonym]
        return prop.default

    def items(self) -> Iterable[tuple[Prop, Any, bool]]:
        """(prop, value, is_default) for every known broker property."""
        for prop in BROKER_PROPS:
            yield prop, self[prop.name], not self.is_explicit(prop.name)


def parse_listener(spec: str) -> tuple[str, int]:
    """'PLAINTEXT://host:port[,...]' -> (host, port) of the first listener."""
    first = spec.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep:
        raise ConfigError(f"Invalid listener {spec!r}: expected NAME://host:port")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise ConfigError(f"Invalid listener {spec!r}: bad port") from None


def read_properties(path: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if not s or s[0] in "#!":
                continue
            for sep in ("=", ":"):
                if sep in s:
                    k, v = s.split(sep, 1)
                    out[k.strip()] = v.strip()
                    break
            else:
                raise ConfigError(f"{path}: cannot parse line {line.rstrip()!r}")
    return out


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """KAFKALITE_LOG_SEGMENT_BYTES=... -> log.segment.bytes=..."""
    environ = os.environ if environ is None else environ
    known = {p.name.upper().replace(".", "_"): p.name for p in BROKER_PROPS}
    out: dict[str, str] = {}
    for key, value in environ.items():
        if not key.startswith("KAFKALITE_"):
            continue
        suffix = key[len("KAFKALITE_"):]
        name = known.get(suffix)
        if name is None:
            continue  # KAFKALITE_* vars that are not properties (e.g. test knobs) are ignored
        out[name] = value
    return out


def load_config(path: str | None = None, sets: Iterable[str] = (),
                environ: Mapping[str, str] | None = None) -> BrokerConfig:
    merged: dict[str, str] = {}
    if path:
        merged.update(read_properties(path))
    merged.update(env_overrides(environ))
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        merged[k.strip()] = v.strip()
    cfg = BrokerConfig(merged)
    cfg.listener()
    if cfg["advertised.listeners"]:
        parse_listener(cfg["advertised.listeners"])
    return cfg
