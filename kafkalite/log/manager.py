# The log manager: every topic and partition on disk, their metadata and configs.
#
# Layout under the data directory (log.dirs, first entry):
#   meta.properties                 cluster.id and node.id, as Kafka writes them
#   <topic>-<partition>/            one directory per partition (segments, indexes)
#   .kafkalite/topics/<topic>.json  topic id, partition count, config overrides
#   .kafkalite_cleanshutdown        present only after a clean shutdown
# A topic exists once its metadata file exists (written atomically); partition directories
# without one are leftovers of an interrupted create or delete and are removed at start.
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..config import BrokerConfig, ConfigError, parse_topic_value
from ..fileio import atomic_write
from ..topic_config import check_topic_configs
from ..wire.errors import ErrorCode, KafkaError
from .partition import LogConfig, PartitionLog

log = logging.getLogger("kafkalite.log")

CLEAN_SHUTDOWN_MARKER = ".kafkalite_cleanshutdown"
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate, answered with INVALID_TOPIC_EXCEPTION."""
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} "
                         "characters")
    if not _LEGAL.match(name):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"Topic name \"{name}\" is illegal, it contains a character other "
                         "than ASCII alphanumerics, '.', '_' and '-'")


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionLog] = field(default_factory=list)
    internal: bool = False


class LogManager:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.data_dir = os.path.abspath(config.data_dir)
        self.meta_dir = os.path.join(self.data_dir, ".kafkalite", "topics")
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.cluster_id = ""
        self.was_clean = True

    # --- startup and shutdown -------------------------------------------------------------

    def open(self) -> None:
        os.makedirs(self.meta_dir, exist_ok=True)
        self._load_meta_properties()
        marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_MARKER)
        has_data = any(n.endswith(".json") for n in os.listdir(self.meta_dir))
        self.was_clean = os.path.exists(marker) or not has_data
        if not self.was_clean:
            log.warning("No clean-shutdown marker in %s: recovering partition tails",
                        self.data_dir)
        t0 = time.monotonic()
        for name in sorted(os.listdir(self.meta_dir)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(self.meta_dir, name), "rb") as f:
                meta = json.load(f)
            topic = Topic(meta["name"], uuid.UUID(meta["topic_id"]), meta.get("configs", {}),
                          internal=meta.get("internal", False))
            lc = self.log_config(topic.configs)
            for p in range(meta["partitions"]):
                topic.partitions.append(PartitionLog(self._pdir(topic.name, p), topic.name, p,
                                                     lc, recover=not self.was_clean))
            self._register(topic)
        self._remove_orphans()
        if os.path.exists(marker):
            os.unlink(marker)  # from here on, a crash is an unclean shutdown
        log.info("Loaded %d topics from %s in %.3fs (%s)", len(self.topics), self.data_dir,
                 time.monotonic() - t0, "clean" if self.was_clean else "recovered")

    def _load_meta_properties(self) -> None:
        path = os.path.join(self.data_dir, "meta.properties")
        props: dict[str, str] = {}
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if "=" in line and not line.startswith("#"):
                        k, v = line.strip().split("=", 1)
                        props[k] = v
        configured = self.config["cluster.id"]
        if configured and props.get("cluster.id") and props["cluster.id"] != configured:
            raise ConfigError(f"cluster.id {configured} does not match {props['cluster.id']} "
                              f"stored in {path}")
        self.cluster_id = props.get("cluster.id") or configured or _new_cluster_id()
        props.update({"version": "1", "cluster.id": self.cluster_id,
                      "node.id": str(self.config.node_id)})
        body = "".join(f"{k}={v}\n" for k, v in props.items())
        atomic_write(path, body.encode())

    def _remove_orphans(self) -> None:
        for name in os.listdir(self.data_dir):
            full = os.path.join(self.data_dir, name)
            if not os.path.isdir(full) or name.startswith("."):
                continue
            topic, _, part = name.rpartition("-")
            if not part.isdigit() or topic not in self.topics \
                    or int(part) >= len(self.topics[topic].partitions):
                log.warning("Removing orphaned partition directory %s", full)
                shutil.rmtree(full, ignore_errors=True)

    def close(self, clean: bool = True) -> None:
        for topic in self.topics.values():
            for p in topic.partitions:
                try:
                    p.flush()
                finally:
                    p.close()
        if clean:
            atomic_write(os.path.join(self.data_dir, CLEAN_SHUTDOWN_MARKER), b"")

    # --- lookups --------------------------------------------------------------------------

    def _pdir(self, topic: str, partition: int) -> str:
        return os.path.join(self.data_dir, f"{topic}-{partition}")

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    def all_partitions(self) -> Iterator[PartitionLog]:
        for t in self.topics.values():
            yield from t.partitions

    # --- configs --------------------------------------------------------------------------

    def effective(self, overrides: dict[str, str], name: str) -> Any:
        if name in overrides:
            return parse_topic_value(name, overrides[name])
        return self.config.topic_default(name)

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        e = lambda n: self.effective(overrides, n)  # noqa: E731
        return LogConfig(
            segment_bytes=e("segment.bytes"), segment_ms=e("segment.ms"),
            retention_ms=e("retention.ms"), retention_bytes=e("retention.bytes"),
            index_interval_bytes=e("index.interval.bytes"),
            flush_messages=e("flush.messages"), flush_ms=e("flush.ms"),
            max_message_bytes=e("max.message.bytes"),
            log_append_time=e("message.timestamp.type") == "LogAppendTime",
            timestamp_before_max_ms=e("message.timestamp.before.max.ms"),
            timestamp_after_max_ms=e("message.timestamp.after.max.ms"),
            cleanup_policy=e("cleanup.policy"))

    @staticmethod
    def check_configs(configs: dict[str, str | None]) -> dict[str, str]:
        return check_topic_configs(configs)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        topic.configs = self.check_configs(configs)  # type: ignore[arg-type]
        self._write_meta(topic)
        lc = self.log_config(topic.configs)
        for p in topic.partitions:
            p.config = lc

    # --- topic lifecycle ------------------------------------------------------------------

    def _write_meta(self, topic: Topic) -> None:
        meta = {"name": topic.name, "topic_id": str(topic.topic_id),
                "partitions": len(topic.partitions), "configs": topic.configs,
                "internal": topic.internal}
        atomic_write(os.path.join(self.meta_dir, topic.name + ".json"),
                      json.dumps(meta, indent=1).encode())

    def validate_new_topic(self, name: str, partitions: int, configs: dict) -> dict[str, str]:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        folded = name.replace(".", "_")
        for other in self.topics:
            if other.replace(".", "_") == folded:
                raise KafkaError(ErrorCode.invalid_topic_exception,
                                 f"Topic '{name}' collides with existing topic: {other}")
        if partitions < 1:
            raise KafkaError(ErrorCode.invalid_partitions,
                             "Number of partitions must be larger than 0.")
        return self.check_configs(configs)

    def create_topic(self, name: str, partitions: int, configs: dict | None = None,
                     internal: bool = False) -> Topic:
        checked = self.validate_new_topic(name, partitions, configs or {})
        topic = Topic(name, uuid.uuid4(), checked, internal=internal)
        lc = self.log_config(checked)
        for p in range(partitions):
            topic.partitions.append(PartitionLog(self._pdir(name, p), name, p, lc))
        self._write_meta(topic)
        self._register(topic)
        log.info("Created topic %s with %d partitions", name, partitions)
        return topic

    def add_partitions(self, name: str, total: int) -> None:
        topic = self.topics[name]
        lc = self.log_config(topic.configs)
        for p in range(len(topic.partitions), total):
            topic.partitions.append(PartitionLog(self._pdir(name, p), name, p, lc))
        self._write_meta(topic)

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.pop(name)
        self.by_id.pop(topic.topic_id, None)
        os.unlink(os.path.join(self.meta_dir, name + ".json"))  # the commit point
        doomed = []
        for p in topic.partitions:
            p.close()
            # As Kafka: rename to <dir>.<id>-delete at once (the name is free for a new
            # topic), remove the files in the background so a large topic does not stall
            # every connection; a leftover is removed at the next start (_remove_orphans).
            target = f"{p.directory}.{uuid.uuid4().hex}-delete"
            try:
                os.rename(p.directory, target)
                doomed.append(target)
            except OSError:
                doomed.append(p.directory)
        threading.Thread(target=_remove_dirs, args=(doomed,), name="delete-" + name,
                         daemon=True).start()
        log.info("Deleted topic %s", name)
        return topic

    # --- periodic work --------------------------------------------------------------------

    def apply_retention(self, now_ms: int | None = None) -> int:
        return sum(p.apply_retention(now_ms) for p in self.all_partitions())

    def flush_by_time(self, now_ms: int) -> None:
        for p in self.all_partitions():
            p.maybe_flush_by_time(now_ms)


def _remove_dirs(paths: list[str]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _new_cluster_id() -> str:
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
