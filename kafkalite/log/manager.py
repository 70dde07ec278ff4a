# The log manager: every topic and partition on disk, their metadata and configs.
#
# Layout under the data directory (log.dirs, first entry):
#   .lock                           flock'ed by the broker using the directory (datadir.py)
#   meta.properties                 cluster.id and node.id, as Kafka writes them
#   <topic>-<partition>/            one directory per partition (segments, indexes) with
#                                   Kafka's partition.metadata naming its topic id
#   .kafkalite/topics/<topic>.json  topic id, partition count, config overrides
#   .kafkalite_cleanshutdown        present only after a clean shutdown
# A topic exists once its metadata file exists (written atomically). Nothing else in the
# directory is deleted but kafkalite's own `*-delete` directories (deleted topics): a partition
# directory of an unknown topic (its metadata file lost, an interrupted create) or anything
# else is left alone with a warning, and one whose partition.metadata names another topic id
# is renamed aside (`*-stray`, as Kafka) when its name is needed, never adopted.
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
from . import datadir
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
        self._lock: datadir.DirLock | None = None

    # --- startup and shutdown -------------------------------------------------------------

    def open(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        # Checked before the lock is taken, so that a refused directory is left without even a
        # .lock file. A kafkalite starting meanwhile cannot make the check wrong: it writes
        # meta.properties (atomically) before anything that is not hidden.
        datadir.refuse_foreign(self.data_dir)
        self._lock = datadir.DirLock(self.data_dir)
        try:
            self._load()
        except BaseException:
            self._lock.release()  # a failed start leaves the directory free
            raise

    def _load(self) -> None:
        self.cluster_id = datadir.load_meta_properties(
            self.data_dir, self.config["cluster.id"], self.config.node_id)
        os.makedirs(self.meta_dir, exist_ok=True)
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
                topic.partitions.append(self._open_partition(topic, p, lc, known=True,
                                                             recover=not self.was_clean))
            self._register(topic)
        self._scan_data_dir()
        if os.path.exists(marker):
            # From here on a crash is an unclean shutdown, also after a power failure.
            datadir.unlink_durably(marker)
        log.info("Loaded %d topics from %s in %.3fs (%s)", len(self.topics), self.data_dir,
                 time.monotonic() - t0, "clean" if self.was_clean else "recovered")

    def _open_partition(self, topic: Topic, p: int, lc: LogConfig, known: bool,
                        recover: bool = False) -> PartitionLog:
        """The partition's log in `<topic>-<p>`. A directory there is adopted only when its
        partition.metadata names this topic, or, for a topic loaded from its metadata file
        (`known`), when it has none (written by a kafkalite before partition.metadata, or
        lost): anything else is renamed aside, never deleted."""
        directory = self._pdir(topic.name, p)
        found = datadir.read_partition_metadata(directory)
        if found != topic.topic_id and (found is not None or not known) \
                and os.path.isdir(directory):
            aside = datadir.set_aside_name(directory, "stray")
            log.warning("Partition directory %s is not topic %s's (%s): renamed to %s",
                        directory, topic.name,
                        f"its partition.metadata names topic id {datadir.uuid_b64(found)}"
                        if found else "it has no partition.metadata", aside)
            os.rename(directory, aside)
        part = PartitionLog(directory, topic.name, p, lc, recover=recover)
        if found != topic.topic_id:
            datadir.write_partition_metadata(directory, topic.topic_id)
        return part

    def _scan_data_dir(self) -> None:
        """Remove leftovers of deleted topics; leave everything unknown alone, saying so."""
        doomed = []
        for name in sorted(os.listdir(self.data_dir)):
            full = os.path.join(self.data_dir, name)
            if name.startswith(".") or name == datadir.LOST_FOUND or not os.path.isdir(full):
                continue
            kind = datadir.is_set_aside(name)
            if kind == "delete":
                doomed.append(full)
                continue
            topic, _, part = name.rpartition("-")
            known = self.topics.get(topic)
            if kind is None and part.isdigit() and known is not None \
                    and int(part) < len(known.partitions):
                continue
            log.warning("Leaving %s alone: %s", full, self._whose(full, kind))
        if doomed:
            log.info("Removing %d directories of deleted topics", len(doomed))
            _remove_in_background(doomed, "delete-leftovers")

    def _whose(self, directory: str, kind: str | None) -> str:
        if kind == "stray":
            return "set aside, its partition.metadata names another topic id"
        found = datadir.read_partition_metadata(directory)
        if found is None:
            return "not a partition of a known topic"
        topic = self.by_id.get(found)
        if topic is not None:
            return (f"a partition of topic {topic.name}, beyond its {len(topic.partitions)} "
                    "partitions")
        return (f"a partition of topic id {datadir.uuid_b64(found)}, not a known topic "
                "(deleted, or its .kafkalite/topics/<topic>.json is lost)")

    def close(self, clean: bool = True) -> None:
        try:
            for topic in self.topics.values():
                for p in topic.partitions:
                    try:
                        p.flush()
                    finally:
                        p.close()
            # Only the broker holding the lock may say that the directory was left clean.
            if clean and self._lock is not None and self._lock.held:
                atomic_write(os.path.join(self.data_dir, CLEAN_SHUTDOWN_MARKER), b"")
        finally:
            if self._lock is not None:
                self._lock.release()

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
            topic.partitions.append(self._open_partition(topic, p, lc, known=False))
        self._write_meta(topic)
        self._register(topic)
        log.info("Created topic %s with %d partitions", name, partitions)
        return topic

    def add_partitions(self, name: str, total: int) -> None:
        topic = self.topics[name]
        lc = self.log_config(topic.configs)
        for p in range(len(topic.partitions), total):
            topic.partitions.append(self._open_partition(topic, p, lc, known=False))
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
            # every connection; a leftover is removed at the next start (_scan_data_dir).
            target = datadir.set_aside_name(p.directory, "delete")
            try:
                os.rename(p.directory, target)
                doomed.append(target)
            except OSError:
                doomed.append(p.directory)
        _remove_in_background(doomed, "delete-" + name)
        log.info("Deleted topic %s", name)
        return topic

    # --- periodic work --------------------------------------------------------------------

    def apply_retention(self, now_ms: int | None = None) -> int:
        return sum(p.apply_retention(now_ms) for p in self.all_partitions())

    def flush_by_time(self, now_ms: int) -> None:
        for p in self.all_partitions():
            p.maybe_flush_by_time(now_ms)


def _remove_in_background(paths: list[str], name: str) -> None:
    threading.Thread(target=_remove_dirs, args=(paths,), name=name, daemon=True).start()


def _remove_dirs(paths: list[str]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
