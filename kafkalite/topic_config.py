# Kafka's topic configs (LogConfig): names, types, broker synonyms, checks and documentation,
# and the validation of a topic's override set (INVALID_CONFIG with Kafka's messages).
#
# The set is Kafka 3.9's: Kafka 4.0's configs plus the three it removed, which Kafka 3.x
# still accepts and which 3.x clients still set: message.format.version (any MetadataVersion
# string, ignored from 3.0 on), message.downconversion.enable and
# message.timestamp.difference.max.ms. kafkalite accepts and describes them as Kafka 3.9 does
# and applies none of them (COMPATIBILITY.md). An empty cleanup.policy is valid, as in Kafka.
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .config_values import (LONG_MAX, Check, ConfigError, at_least, between, list_of, one_of,
                            parse_value)
from .wire.errors import ErrorCode, KafkaError

COMPRESSION_TYPE = one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
GZIP_LEVEL = Check(lambda v: v == -1 or 1 <= v <= 9,
                   "Value must be between 1 and 9 or equal to -1")
LZ4_LEVEL = between(1, 17)
ZSTD_LEVEL = between(-131072, 22)
CLEANUP_POLICY = list_of("compact", "delete")
TIMESTAMP_TYPE = one_of("CreateTime", "LogAppendTime")

# MetadataVersion of Kafka 3.8/3.9 (release -> its IV count), for message.format.version.
_RELEASES = {"0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2,
             "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2,
             "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5,
             "3.8": 1, "3.9": 1}
METADATA_VERSIONS = frozenset(
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0", *_RELEASES]
    + [f"{release}-IV{i}" for release, n in _RELEASES.items() for i in range(n)])


def is_metadata_version(v: str) -> bool:
    """MetadataVersion.fromVersionString: "2.8.1" means "2.8", "0.10.0.1" means "0.10.0"."""
    segments = v.split(".")
    while segments and not segments[-1]:  # Java's split drops trailing empty strings
        segments.pop()
    keep = 3 if v.startswith("0.") else 2
    return (v if keep >= len(segments) else ".".join(segments[:keep])) in METADATA_VERSIONS


MESSAGE_FORMAT_VERSION = Check(is_metadata_version, "not a valid version",
                               lambda v: f"Version {v} is not a valid version")


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
    TopicProp("message.downconversion.enable", "boolean", "log.message.downconversion.enable",
              True),
    TopicProp("message.format.version", "string", "log.message.format.version", "3.0-IV1"),
    TopicProp("message.timestamp.after.max.ms", "long", "log.message.timestamp.after.max.ms",
              3600000),
    TopicProp("message.timestamp.before.max.ms", "long", "log.message.timestamp.before.max.ms",
              LONG_MAX),
    TopicProp("message.timestamp.difference.max.ms", "long",
              "log.message.timestamp.difference.max.ms", LONG_MAX),
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

def _throttled_replicas(name: str) -> Check:
    """ThrottledReplicaListValidator: "*" or partition:broker pairs."""
    def items(v: str) -> list[str]:
        return [i.strip() for i in v.split(",")] if v.strip() else []

    def ok(v: str) -> bool:
        pairs = items(v)
        return pairs == ["*"] or all(re.fullmatch(r"\d+:\d+", i) for i in pairs)
    return Check(ok, f"{name} must be the literal '*' or a list of replicas in the following "
                     "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                 shown=lambda v: "[" + ", ".join(items(v)) + "]")


# LogConfig's validators (Kafka 3.8's topic config definitions).
TOPIC_CHECKS: dict[str, Check] = {
    "cleanup.policy": CLEANUP_POLICY,
    "compression.type": COMPRESSION_TYPE,
    "compression.gzip.level": GZIP_LEVEL,
    "compression.lz4.level": LZ4_LEVEL,
    "compression.zstd.level": ZSTD_LEVEL,
    "delete.retention.ms": at_least(0),
    "file.delete.delay.ms": at_least(0),
    "flush.messages": at_least(1),
    "flush.ms": at_least(0),
    "follower.replication.throttled.replicas":
        _throttled_replicas("follower.replication.throttled.replicas"),
    "index.interval.bytes": at_least(0),
    "leader.replication.throttled.replicas":
        _throttled_replicas("leader.replication.throttled.replicas"),
    "local.retention.bytes": at_least(-2),
    "local.retention.ms": at_least(-2),
    "max.compaction.lag.ms": at_least(1),
    "max.message.bytes": at_least(0),
    "message.format.version": MESSAGE_FORMAT_VERSION,
    "message.timestamp.after.max.ms": at_least(0),
    "message.timestamp.before.max.ms": at_least(0),
    "message.timestamp.difference.max.ms": at_least(0),
    "message.timestamp.type": TIMESTAMP_TYPE,
    "min.cleanable.dirty.ratio": between(0, 1),
    "min.compaction.lag.ms": at_least(0),
    "min.insync.replicas": at_least(1),
    "retention.ms": at_least(-1),
    "segment.bytes": at_least(14),
    "segment.index.bytes": at_least(4),
    "segment.jitter.ms": at_least(0),
    "segment.ms": at_least(1),
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
    "message.downconversion.enable": "Whether records are down-converted for consumers that "
                                     "need an older message format.",
    "message.format.version": "[DEPRECATED] Message format version of appended records; "
                              "ignored from Kafka 3.0 on.",
    "message.timestamp.after.max.ms": "How far in the future a record timestamp may be.",
    "message.timestamp.before.max.ms": "How far in the past a record timestamp may be.",
    "message.timestamp.difference.max.ms": "[DEPRECATED] Largest difference between a "
                                           "record's timestamp and the broker's clock.",
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

# Topic configs kafkalite accepts and describes but does not apply (COMPATIBILITY.md).
IGNORED_TOPIC_CONFIGS = (
    "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "message.downconversion.enable", "message.format.version",
    "message.timestamp.difference.max.ms", "min.insync.replicas", "preallocate", "segment.index.bytes",
    "segment.jitter.ms")


def parse_topic_value(name: str, raw: str) -> Any:
    """Parse and validate a topic config value; raises ConfigError (INVALID_CONFIG)."""
    prop = TOPIC_PROP_MAP.get(name)
    if prop is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    return parse_value(name, prop.type, raw, TOPIC_CHECKS.get(name))


def check_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """A topic's override set, validated as Kafka's controller does (INVALID_CONFIG)."""
    out = {}
    for k, v in configs.items():
        if k not in TOPIC_PROP_MAP:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {k}")
        if v is None:
            raise KafkaError(ErrorCode.invalid_config,
                             f"Null value not supported for topic configs: {k}")
        try:
            value = parse_topic_value(k, v)
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
        if k == "remote.storage.enable" and value:  # kafkalite has no tiered storage
            raise KafkaError(ErrorCode.invalid_config,
                             "Tiered Storage functionality is disabled in the broker. Topic "
                             "cannot be configured with remote log storage.")
        out[k] = v
    return out
