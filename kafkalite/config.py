# Broker configuration under Apache Kafka's property names.
#
# Sources, later wins: built-in defaults < server.properties < KAFKALITE_* environment
# variables < --set key=value. An unknown property warns (Kafka logs "not a known config");
# an invalid value raises ConfigError, which the CLI turns into exit code 2. Above those
# static sources sit the dynamic broker configs (AlterConfigs on a BROKER resource, see
# broker/dynamic_configs.py): cluster-wide defaults, then this node's own.
# Most of this module is Kafka's broker property table, so that DescribeConfigs, validation
# and the defaults read one source; the topic configs are in topic_config.py.
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .config_listeners import LISTENER_PREFIX, LISTENER_PROPS, listener_override
from .config_values import (LONG_MAX, Check, ConfigError, at_least, between, format_value,
                            one_of, parse_value)
from .topic_config import (CLEANUP_POLICY, COMPRESSION_TYPE, GZIP_LEVEL, LZ4_LEVEL,
                           MESSAGE_FORMAT_VERSION, TIMESTAMP_TYPE, TOPIC_DOCS, TOPIC_PROP_MAP,
                           TOPIC_PROPS, ZSTD_LEVEL, TopicProp, parse_topic_value)

log = logging.getLogger("kafkalite.config")

# What callers import from here (some of it defined in config_values.py and topic_config.py).
__all__ = ["LONG_MAX", "ConfigError", "format_value", "TOPIC_DOCS", "TOPIC_PROP_MAP",
           "TOPIC_PROPS", "TopicProp", "parse_topic_value", "Prop", "PROPS", "BROKER_PROPS",
           "BrokerConfig", "BROKER_LEVEL", "DEFAULT_LEVEL", "STATIC_LEVEL", "IGNORED",
           "ignored_settings", "parse_prop", "load_config", "parse_listener",
           "read_properties", "env_overrides"]


@dataclass(frozen=True)
class Prop:
    name: str
    type: str  # Kafka's ConfigType names: int, short, long, boolean, string, list, double
    default: Any
    check: Check | None = None
    doc: str = ""
    sensitive: bool = False
    read_only: bool = True


_at_least = at_least  # the names Prop lines use
_one_of = one_of


AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")

BROKER_PROPS: list[Prop] = [
    Prop("node.id", "int", 1, _at_least(0), "Broker id (keep it small: librdkafka assumes so)."),
    Prop("broker.id", "int", -1, None, "Alias of node.id kept for old configs."),
    Prop("listeners", "string", "PLAINTEXT://localhost:9092", read_only=False),
    Prop("advertised.listeners", "string", None, read_only=False),
    *(Prop(n, t, d, None, doc, sensitive=s) for n, t, d, s, doc in LISTENER_PROPS),
    Prop("log.dirs", "string", None),
    Prop("log.dir", "string", "./data"),
    Prop("cluster.id", "string", None, None, "Cluster id; generated and persisted when unset."),
    # A cluster coordinated by ZooKeeper (issue 17, Kafka's ZooKeeper mode); unset, the broker
    # is the single node it always was and kazoo is never imported.
    Prop("zookeeper.connect", "string", None, None,
         "ZooKeeper hosts host:port[,host:port...][/chroot]; unset: a single-node broker."),
    Prop("zookeeper.session.timeout.ms", "int", 18000, _at_least(1)),
    Prop("zookeeper.connection.timeout.ms", "int", None, _at_least(1), "Time to wait for "
         "ZooKeeper at start; unset: zookeeper.session.timeout.ms."),
    Prop("broker.rack", "string", None, None, "Rack of the broker (rack-aware placement)."),
    Prop("kafkalite.controller.enable", "boolean", True, None, "With zookeeper.connect: "
         "contend for /controller. false only for tests that play the controller."),
    # Replication between cluster brokers (cluster/replication.py, replica_fetcher.py).
    Prop("replica.lag.time.max.ms", "long", 30000, _at_least(1)),
    Prop("replica.fetch.wait.max.ms", "int", 500, _at_least(0)),
    Prop("replica.fetch.min.bytes", "int", 1, _at_least(1)),
    Prop("replica.fetch.max.bytes", "int", 1048576, _at_least(0)),
    Prop("replica.fetch.response.max.bytes", "int", 10485760, _at_least(0)),
    Prop("replica.fetch.backoff.ms", "int", 1000, _at_least(0)),
    Prop("replica.socket.timeout.ms", "int", 30000),
    Prop("replica.high.watermark.checkpoint.interval.ms", "long", 5000, _at_least(1)),
    Prop("controlled.shutdown.enable", "boolean", True),
    Prop("controlled.shutdown.max.retries", "int", 3, _at_least(1)),
    Prop("controlled.shutdown.retry.backoff.ms", "long", 5000, _at_least(0)),
    Prop("auto.leader.rebalance.enable", "boolean", True),
    Prop("leader.imbalance.check.interval.seconds", "long", 300, _at_least(1)),
    Prop("leader.imbalance.per.broker.percentage", "int", 10, _at_least(0)),
    Prop("num.partitions", "int", 1, _at_least(1)),
    Prop("default.replication.factor", "int", 1, _at_least(1)),
    Prop("auto.create.topics.enable", "boolean", True),
    Prop("delete.topic.enable", "boolean", True),
    Prop("log.segment.bytes", "int", 1073741824, _at_least(14), read_only=False),
    Prop("log.roll.ms", "long", None, read_only=False),
    Prop("log.roll.hours", "int", 168, _at_least(1)),
    Prop("log.roll.jitter.ms", "long", None, _at_least(0), read_only=False),
    Prop("log.roll.jitter.hours", "int", 0, _at_least(0)),
    Prop("log.retention.ms", "long", None, read_only=False),
    Prop("log.retention.minutes", "int", None),
    Prop("log.retention.hours", "int", 168),
    Prop("log.retention.bytes", "long", -1, read_only=False),
    Prop("log.retention.check.interval.ms", "long", 300000, _at_least(1)),
    Prop("log.segment.delete.delay.ms", "long", 60000, _at_least(0), read_only=False),
    Prop("log.flush.interval.messages", "long", LONG_MAX, _at_least(1), read_only=False),
    Prop("log.flush.interval.ms", "long", None, read_only=False),
    Prop("log.flush.scheduler.interval.ms", "long", LONG_MAX),
    Prop("log.index.interval.bytes", "int", 4096, _at_least(0), read_only=False),
    Prop("log.index.size.max.bytes", "int", 10485760, _at_least(4), read_only=False),
    Prop("log.cleanup.policy", "list", "delete", CLEANUP_POLICY, read_only=False),
    Prop("log.cleaner.delete.retention.ms", "long", 86400000, _at_least(0), read_only=False),
    Prop("log.cleaner.min.compaction.lag.ms", "long", 0, _at_least(0), read_only=False),
    Prop("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, _at_least(1), read_only=False),
    Prop("log.cleaner.min.cleanable.ratio", "double", 0.5, between(0, 1), read_only=False),
    Prop("log.cleaner.enable", "boolean", True, None,
         "Run the log cleaner (compaction of topics whose cleanup.policy holds compact)."),
    Prop("log.cleaner.threads", "int", 1, _at_least(0)),
    Prop("log.cleaner.backoff.ms", "long", 15000, _at_least(0)),
    Prop("log.cleaner.dedupe.buffer.size", "long", 134217728),
    Prop("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
    Prop("log.message.timestamp.type", "string", "CreateTime", TIMESTAMP_TYPE, read_only=False),
    Prop("log.message.timestamp.before.max.ms", "long", LONG_MAX, _at_least(0), read_only=False),
    Prop("log.message.timestamp.after.max.ms", "long", 3600000, _at_least(0), read_only=False),
    # Deprecated in Kafka 3.x, removed in 4.0; accepted and ignored (see topic_config.py).
    Prop("log.message.timestamp.difference.max.ms", "long", LONG_MAX, _at_least(0),
         "[DEPRECATED] Largest difference between a record's timestamp and the broker's clock "
         "(CreateTime topics).", read_only=False),
    Prop("log.message.format.version", "string", "3.0-IV1", MESSAGE_FORMAT_VERSION,
         "[DEPRECATED] Message format version of appended records; ignored from Kafka 3.0 on."),
    Prop("log.message.downconversion.enable", "boolean", True, None,
         "Whether records are down-converted for consumers that need an older message format.",
         read_only=False),
    Prop("log.preallocate", "boolean", False, read_only=False),
    Prop("log.local.retention.ms", "long", -2, _at_least(-2), read_only=False),
    Prop("log.local.retention.bytes", "long", -2, _at_least(-2), read_only=False),
    Prop("compression.type", "string", "producer", COMPRESSION_TYPE, read_only=False),
    Prop("compression.gzip.level", "int", -1, GZIP_LEVEL, read_only=False),
    Prop("compression.lz4.level", "int", 9, LZ4_LEVEL, read_only=False),
    Prop("compression.zstd.level", "int", 3, ZSTD_LEVEL, read_only=False),
    Prop("message.max.bytes", "int", 1048588, _at_least(0), read_only=False),
    Prop("min.insync.replicas", "int", 1, _at_least(1), read_only=False),
    Prop("unclean.leader.election.enable", "boolean", False, read_only=False),
    Prop("socket.request.max.bytes", "int", 104857600, _at_least(1)),
    Prop("socket.send.buffer.bytes", "int", 102400),
    Prop("socket.receive.buffer.bytes", "int", 102400),
    Prop("max.connections", "int", 2147483647, _at_least(0), read_only=False),
    Prop("max.connections.per.ip", "int", 2147483647, _at_least(0), read_only=False),
    Prop("connections.max.idle.ms", "long", 600000),
    Prop("sasl.enabled.mechanisms", "list", "GSSAPI", read_only=False),
    # The inter-broker SASL login (cluster/inter_broker.py): PLAIN or SCRAM-SHA-256/512.
    Prop("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", None,
         "SASL mechanism brokers log in to each other with (PLAIN, SCRAM-SHA-256/512)."),
    Prop("sasl.jaas.config", "password", None, None,
         "JAAS login (username, password options) of the inter-broker SASL client when the "
         "listener's listener.name.<l>.<mechanism>.sasl.jaas.config is unset.",
         sensitive=True),
    Prop("connections.max.reauth.ms", "long", 0),
    Prop("connection.failed.authentication.delay.ms", "int", 100, _at_least(0)),
    Prop("queued.max.requests", "int", 500, _at_least(1)),
    Prop("queued.max.request.bytes", "long", -1),
    Prop("max.incremental.fetch.session.cache.slots", "int", 1000, _at_least(0)),
    Prop("num.network.threads", "int", 3, _at_least(1), read_only=False),
    Prop("num.io.threads", "int", 8, _at_least(1), read_only=False),
    Prop("offsets.topic.num.partitions", "int", 50, _at_least(1)),
    Prop("offsets.topic.replication.factor", "short", 3, _at_least(1)),
    Prop("offsets.topic.segment.bytes", "int", 104857600, _at_least(1)),
    Prop("offsets.retention.minutes", "int", 10080, _at_least(1)),
    Prop("offsets.retention.check.interval.ms", "long", 600000, _at_least(1)),
    Prop("offset.metadata.max.bytes", "int", 4096),
    Prop("offsets.commit.timeout.ms", "int", 5000, _at_least(1)),
    Prop("transaction.state.log.replication.factor", "short", 3),
    Prop("transaction.state.log.min.isr", "int", 2),
    Prop("transactional.id.expiration.ms", "int", 604800000, _at_least(1)),
    Prop("transaction.max.timeout.ms", "int", 900000, _at_least(1)),
    Prop("transaction.state.log.num.partitions", "int", 50, _at_least(1)),
    Prop("transaction.state.log.segment.bytes", "int", 104857600, _at_least(1)),
    Prop("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
         _at_least(1)),
    Prop("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
         _at_least(1)),
    Prop("producer.id.expiration.ms", "int", 86400000, _at_least(1), read_only=False),
    Prop("producer.id.expiration.check.interval.ms", "int", 600000, _at_least(1)),
    Prop("group.initial.rebalance.delay.ms", "int", 3000, _at_least(0)),
    Prop("group.min.session.timeout.ms", "int", 6000, _at_least(0)),
    Prop("group.max.session.timeout.ms", "int", 1800000, _at_least(0)),
    Prop("group.max.size", "int", 2147483647, _at_least(1)),
    # KIP-932 share groups (ShareGroupConfig / GroupCoordinatorConfig, Kafka 4.1 defaults).
    Prop("group.share.session.timeout.ms", "int", 45000, _at_least(1)),
    Prop("group.share.heartbeat.interval.ms", "int", 5000, _at_least(1)),
    Prop("group.share.max.size", "int", 200, _at_least(1)),
    Prop("group.share.record.lock.duration.ms", "int", 30000, _at_least(1000)),
    Prop("group.share.min.record.lock.duration.ms", "int", 15000, _at_least(1000)),
    Prop("group.share.max.record.lock.duration.ms", "int", 60000, _at_least(1000)),
    Prop("group.share.partition.max.record.locks", "int", 2000, _at_least(100)),
    Prop("group.share.delivery.count.limit", "int", 5, _at_least(2)),
    # KIP-848 consumer groups (GroupCoordinatorConfig, Kafka 4.x defaults).
    Prop("group.consumer.session.timeout.ms", "int", 45000, _at_least(1)),
    Prop("group.consumer.min.session.timeout.ms", "int", 45000, _at_least(1)),
    Prop("group.consumer.max.session.timeout.ms", "int", 60000, _at_least(1)),
    Prop("group.consumer.heartbeat.interval.ms", "int", 5000, _at_least(1)),
    Prop("group.consumer.min.heartbeat.interval.ms", "int", 5000, _at_least(1)),
    Prop("group.consumer.max.heartbeat.interval.ms", "int", 15000, _at_least(1)),
    Prop("group.consumer.max.size", "int", 2147483647, _at_least(1)),
    Prop("group.consumer.assignors", "list", "uniform,range", None,
         "Server-side assignors of consumer groups (uniform, range or Kafka's class names); "
         "the first is the default."),
    Prop("group.consumer.migration.policy", "string", "bidirectional",
         _one_of("bidirectional", "upgrade", "downgrade", "disabled"),
         "Online migration between classic and consumer groups (Kafka 4.x's default)."),
    # KIP-932's share coordinator (ShareCoordinatorConfig, Kafka 4.1 defaults).
    Prop("share.coordinator.state.topic.num.partitions", "int", 50, _at_least(1)),
    Prop("share.coordinator.state.topic.segment.bytes", "int", 104857600, _at_least(1)),
    Prop("share.coordinator.snapshot.update.records.per.snapshot", "int", 500,
         _at_least(0)),
    Prop("fetch.max.bytes", "int", 57671680, _at_least(0)),
    Prop("process.roles", "list", "broker,controller"),
    Prop("inter.broker.protocol.version", "string", "3.9-IV0"),
    # The ACL authorizer (security/acls.py): Kafka's two ACL authorizers' class names switch
    # it on; empty, Kafka's default, leaves the ACL APIs answering SECURITY_DISABLED.
    Prop("authorizer.class.name", "string", "", _one_of("", *AUTHORIZER_CLASSES)),
    Prop("super.users", "string", None, None,
         "Principals (User:name, separated by ';') that every ACL check allows."),
    Prop("allow.everyone.if.no.acl.found", "boolean", False),
    # kafkalite's own settings (no Kafka equivalent).
    Prop("kafkalite.fsync.before.ack", "boolean", False, None,
         "fsync the partition before answering acks=all (durable on power loss; slower)."),
    Prop("kafkalite.metrics.port", "int", -1, None, "Prometheus endpoint port; -1 disables it."),
    Prop("kafkalite.produce.validate.records", "boolean", False, None,
         "Decompress and check every produced record as Kafka's LogValidator does "
         "(per-record work; off by default)."),
    Prop("kafkalite.sasl.plain.users", "password", None, None,
         "SASL/PLAIN users name:password[,...] on every SASL listener, besides the "
         "listener's JAAS user_<name> entries.", sensitive=True),
    Prop("kafkalite.sasl.scram.users", "password", None, None,
         "SCRAM-SHA-256 and -512 users name:password[,...] created at start when missing "
         "(4096 iterations).", sensitive=True),
]

PROPS: dict[str, Prop] = {p.name: p for p in BROKER_PROPS}

# Properties kafkalite accepts and describes but does not apply, with why (COMPATIBILITY.md
# lists them, and their topic-level synonyms in topic_config.IGNORED_TOPIC_CONFIGS). A value
# other than the default (or the listed harmless ones) logs one warning at start.
_IGNORED_WHY: dict[str, tuple[str, ...]] = {
    "segments roll without jitter": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segments deleted by retention are removed at once (segments the cleaner replaced wait "
    "file.delete.delay.ms)": ("log.segment.delete.delay.ms",),
    "index files grow as needed; a full index does not roll the segment":
        ("log.index.size.max.bytes",),
    "segment files are not preallocated": ("log.preallocate",),
    "deprecated; use log.message.timestamp.before/after.max.ms":
        ("log.message.timestamp.difference.max.ms",),
    "deprecated; ignored as by Kafka 3.x": ("log.message.format.version",),
    "records are never down-converted": ("log.message.downconversion.enable",),
    "batches are stored as the producer compressed them": (
        "compression.type", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level"),
    "one replica without zookeeper.connect: acks=all is never refused with "
    "NOT_ENOUGH_REPLICAS": ("min.insync.replicas",),
    "the operating system's socket buffer sizes are used": (
        "socket.send.buffer.bytes", "socket.receive.buffer.bytes"),
    "one event loop serves every connection and request": (
        "num.network.threads", "num.io.threads"),
    "one broker, one replica": ("offsets.topic.replication.factor",),
    "one broker, one replica (transactions)": ("transaction.state.log.replication.factor",
                                               "transaction.state.log.min.isr"),
    "a Fetch response is bounded by the request's max_bytes only": ("fetch.max.bytes",),
    "always one combined broker and controller": ("process.roles",),
    "no inter-broker protocol": ("inter.broker.protocol.version",),
}
IGNORED: dict[str, str] = {name: why for why, names in _IGNORED_WHY.items() for name in names}
# Ignored on one node, honoured in a ZooKeeper cluster (the internal topics' creation,
# acks=all against the ISR).
_CLUSTER_HONOURS = ("offsets.topic.replication.factor",
                    "transaction.state.log.replication.factor", "min.insync.replicas")
# Values that do what kafkalite does anyway, so they need no warning.
_HARMLESS: dict[str, tuple[Any, ...]] = {"log.roll.jitter.ms": (None, 0),
                                         "log.roll.jitter.hours": (0,)}


def ignored_settings(cfg: "BrokerConfig") -> list[str]:
    """`name=value (why)` for every ignored property set to a value that matters."""
    out = []
    for name, why in IGNORED.items():
        if cfg["zookeeper.connect"] and name in _CLUSTER_HONOURS:
            continue
        value = cfg[name]
        if value != PROPS[name].default and value not in _HARMLESS.get(name, ()):
            out.append(f"{name}={format_value(value)} ({why})")
    dirs = cfg["log.dirs"]
    if dirs and "," in dirs:
        out.append(f"log.dirs={dirs} (only the first directory is used)")
    return out


# Dynamic broker config layers (AlterConfigs on a BROKER resource), highest precedence first:
# this node's (resource name "<node.id>") and the cluster-wide defaults (resource name "").
BROKER_LEVEL, DEFAULT_LEVEL = "broker", "default"
STATIC_LEVEL = "static"  # file, environment, --set


def parse_prop(prop: Prop, raw: Any) -> Any:
    """A broker property's typed value; raises ConfigError with Kafka's message."""
    return parse_value(prop.name, prop.type, raw, prop.check)


class BrokerConfig:
    """Resolved broker configuration: `cfg["log.segment.bytes"]` or typed helpers.

    A value comes from the first layer that has it: dynamic per-broker, dynamic cluster
    default, static (file, environment, --set: `explicit`), then the built-in default."""

    def __init__(self, overrides: Mapping[str, str] | None = None):
        self.explicit: dict[str, Any] = {}
        # Raw strings as the alter requests gave them, by level (names may be unknown ones).
        self.dynamic: dict[str, dict[str, str]] = {BROKER_LEVEL: {}, DEFAULT_LEVEL: {}}
        self._values: dict[str, Any] = {}
        for key, raw in (overrides or {}).items():
            self.set(key, raw)

    def set(self, key: str, raw: Any) -> None:
        prop = PROPS.get(key)
        if prop is None and key.startswith(LISTENER_PREFIX):
            self.explicit[key] = raw  # a per-listener override, read by security/tls.py
        elif prop is None:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
            self.explicit[key] = raw
        elif raw is None:
            self.explicit[key] = None
        else:
            self.explicit[key] = parse_prop(prop, raw)
        self._merge()

    def set_dynamic(self, level: str, raw: Mapping[str, str]) -> None:
        """Replace one dynamic layer (already validated)."""
        self.dynamic[level] = dict(raw)
        self._merge()

    def _merge(self) -> None:
        values = dict(self.explicit)
        for level in (DEFAULT_LEVEL, BROKER_LEVEL):
            for key, raw in self.dynamic[level].items():
                prop = PROPS.get(key)
                values[key] = parse_prop(prop, raw) if prop is not None else raw
        self._values = values

    def layers(self) -> list[tuple[str, dict[str, Any]]]:
        """(level, values) from the highest precedence down: dynamic per-broker, dynamic
        default, static; dynamic values are the raw strings."""
        return [(BROKER_LEVEL, self.dynamic[BROKER_LEVEL]),
                (DEFAULT_LEVEL, self.dynamic[DEFAULT_LEVEL]), (STATIC_LEVEL, self.explicit)]

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
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
    """A .properties file exactly as java.util.Properties.load reads it (Kafka's
    server.properties): ISO-8859-1 bytes, escapes, continuations, # and ! comments."""
    from .java_properties import PropertiesError, parse
    with open(path, "rb") as f:
        text = f.read().decode("latin-1")
    try:
        return parse(text)
    except PropertiesError as e:
        raise ConfigError(f"{path}: {e}") from None


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """KAFKALITE_LOG_SEGMENT_BYTES=... -> log.segment.bytes=..."""
    environ = os.environ if environ is None else environ
    known = {p.name.upper().replace(".", "_"): p.name for p in BROKER_PROPS}
    # kafkalite's own properties also without the doubled prefix: KAFKALITE_SASL_PLAIN_USERS
    known.update({k[10:]: n for k, n in known.items() if k.startswith("KAFKALITE_")})
    out: dict[str, str] = {}
    for key, value in environ.items():
        if not key.startswith("KAFKALITE_"):
            continue
        suffix = key[len("KAFKALITE_"):]
        name = known.get(suffix) or listener_override(suffix, known)
        if name is None:
            continue  # KAFKALITE_* vars that are not properties (e.g. test knobs) are ignored
        out[name] = value
    return out


def check_consumer_group_bounds(cfg: "BrokerConfig") -> None:
    """GroupCoordinatorConfig's cross-checks of the group.consumer.* settings."""
    for what in ("session.timeout.ms", "heartbeat.interval.ms"):
        value = cfg[f"group.consumer.{what}"]
        low, high = cfg[f"group.consumer.min.{what}"], cfg[f"group.consumer.max.{what}"]
        if high < low:
            raise ConfigError(f"group.consumer.max.{what} must be greater than or equal to "
                              f"group.consumer.min.{what}")
        if value < low:
            raise ConfigError(f"group.consumer.{what} must be greater than or equal to "
                              f"group.consumer.min.{what}")
        if value > high:
            raise ConfigError(f"group.consumer.{what} must be less than or equal to "
                              f"group.consumer.max.{what}")
    if cfg["group.consumer.heartbeat.interval.ms"] >= cfg["group.consumer.session.timeout.ms"]:
        raise ConfigError("group.consumer.heartbeat.interval.ms must be less than "
                          "group.consumer.session.timeout.ms")
    from .coordinator.consumer_assignors import configured
    try:
        configured([a for a in cfg["group.consumer.assignors"].split(",") if a])
    except ValueError as e:
        raise ConfigError(f"Invalid value for configuration group.consumer.assignors: {e}") \
            from None


DEVELOPMENT_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def load_config(path: str | None = None, sets: Iterable[str] = (),
                environ: Mapping[str, str] | None = None) -> BrokerConfig:
    merged: dict[str, str] = {}
    if path:
        merged.update(read_properties(path))
    else:
        # No file: the out-of-the-box case, which Kafka's own shipped server.properties serves
        # with 0 "for a better out-of-the-box experience for development and testing". A file
        # that leaves it out gets Kafka's code default (3000), as with Kafka.
        merged.update(DEVELOPMENT_DEFAULTS)
    merged.update(env_overrides(environ))
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        merged[k.strip()] = v.strip()
    cfg = BrokerConfig(merged)
    check_consumer_group_bounds(cfg)
    from .security.listeners import parse_listeners
    parse_listeners(cfg)
    return cfg
