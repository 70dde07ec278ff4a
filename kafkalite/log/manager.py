# The log manager: every topic and partition on disk, their metadata and configs.
#
# Layout under the data directory (log.dirs, first entry):
#   .lock                           flock'ed by the broker using the directory (datadir.py)
#   meta.properties                 cluster.id and node.id, as Kafka writes them
#   <topic>-<partition>/            one directory per partition (segments, indexes) with
#                                   Kafka's partition.metadata naming its topic id
#   .kafkalite/topics/<topic>.json  topic id, partition count, config overrides
#   .kafkalite_cleanshutdown        present only after a clean shutdown
#   replication-offset-checkpoint   replicated partitions' high watermarks (hw_checkpoint.py)
# A topic exists once its metadata file exists (written atomically). Nothing else in the
# directory is deleted but kafkalite's own `*-delete` directories (deleted topics): a partition
# directory of an unknown topic (its metadata file lost, an interrupted create) or anything
# else is left alone with a warning, and one whose partition.metadata names another topic id
# is renamed aside (`*-stray`, as Kafka) when its name is needed, never adopted.
#
# The topics' creation, growth, config writes and deletion are TopicLifecycle's
# (topic_lifecycle.py): their file work runs on the metadata worker thread, off the loop.
from __future__ import annotations

import json
import logging
import os
import time
import uuid
from concurrent.futures import Future
from typing import Any, Iterator

from ..config import BrokerConfig, parse_topic_value
from ..fileio import atomic_write
from ..topic_config import check_topic_configs
from ..wire.recompress import target_codec
from . import datadir
from . import hw_checkpoint
from .cleaner import CleanerSettings, LogCleaner
from .flusher import open_dir, shared_flusher, write_and_close
from .partition import LogConfig, PartitionLog
from .topic_lifecycle import (MAX_NAME_LENGTH, Topic, TopicLifecycle, remove_in_background,
                              validate_topic_name)

__all__ = ["CLEAN_SHUTDOWN_MARKER", "MAX_NAME_LENGTH", "LogManager", "Topic",
           "validate_topic_name"]

log = logging.getLogger("kafkalite.log")

CLEAN_SHUTDOWN_MARKER = ".kafkalite_cleanshutdown"


class LogManager(TopicLifecycle):
    def __init__(self, config: BrokerConfig):
        super().__init__()
        self.config = config
        self.data_dir = os.path.abspath(config.data_dir)
        self.meta_dir = os.path.join(self.data_dir, ".kafkalite", "topics")
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.cluster_id = ""
        self.was_clean = True
        self._lock: datadir.DirLock | None = None
        self.cleaner: LogCleaner | None = None  # start_cleaner()
        self._cluster_topic_ids: dict[str, uuid.UUID] = {}  # adopt_topic_async's, by name

    # --- startup and shutdown -------------------------------------------------------------

    def open(self) -> None:
        """Load the data directory, blocking: the broker calls it before it listens, so the
        start's file work (meta.properties, partition.metadata, recovery) stalls no one."""
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
        hws = hw_checkpoint.read_checkpoint(self.data_dir)
        for name in sorted(os.listdir(self.meta_dir)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(self.meta_dir, name), "rb") as f:
                meta = json.load(f)
            topic = Topic(meta["name"], uuid.UUID(meta["topic_id"]), meta.get("configs", {}),
                          internal=meta.get("internal", False))
            lc = self.log_config(topic.configs)
            for p in range(meta["partitions"]):
                part = self._open_partition(topic, p, lc, known=True,
                                            recover=not self.was_clean)
                part.restore_high_watermark(hws.get((topic.name, p), 0))
                topic.partitions.append(part)
            topic.meta_partitions = len(topic.partitions)
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
            remove_in_background(doomed, "delete-leftovers")

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

    def start_cleaner(self, clock: Any = None) -> LogCleaner:
        """Start the log cleaner's threads (log.cleaner.enable). It cleans every partition
        whose cleanup.policy holds `compact`, internal topics (__consumer_offsets,
        __transaction_state) included."""
        c = self.config
        settings = CleanerSettings(
            enable=c["log.cleaner.enable"] and c["log.cleaner.threads"] > 0,
            threads=c["log.cleaner.threads"], backoff_ms=c["log.cleaner.backoff.ms"],
            dedupe_buffer_size=c["log.cleaner.dedupe.buffer.size"],
            io_max_bytes_per_second=c["log.cleaner.io.max.bytes.per.second"])
        self.cleaner = LogCleaner(self.data_dir, self._cleanable_partitions, settings, clock)
        self.cleaner.start()
        return self.cleaner

    def _cleanable_partitions(self) -> list[PartitionLog]:
        return [p for t in list(self.topics.values()) for p in t.partitions]

    def close(self, clean: bool = True) -> None:
        if self.cleaner is not None:
            self.cleaner.stop()
        try:
            for topic in self.topics.values():
                for p in topic.partitions:
                    try:
                        p.flush()
                    finally:
                        p.close()
            try:
                written = self.checkpoint_high_watermarks()
                if written is not None:
                    written.result()
            except OSError as e:  # the next start begins from an older, lower one: safe
                log.error("High watermark checkpoint not written at shutdown: %s", e)
            # Only the broker holding the lock may say that the directory was left clean.
            if clean and self._lock is not None and self._lock.held:
                atomic_write(os.path.join(self.data_dir, CLEAN_SHUTDOWN_MARKER), b"")
        finally:
            if self._lock is not None:
                self._lock.release()

    def checkpoint_high_watermarks(self) -> Future | None:
        """Queue an atomic, durable rewrite of `replication-offset-checkpoint` with every
        replicated partition's high watermark, on the flusher thread; None (no file
        written) while no partition is replicated. Raises OSError when the data directory
        cannot be opened."""
        entries = [(p.topic, p.partition, p.high_watermark)
                   for p in self.all_partitions() if p.replicated]
        if not entries:
            return None
        data = hw_checkpoint.format_checkpoint(entries)
        return shared_flusher().submit(write_and_close, open_dir(self.data_dir),
                                       hw_checkpoint.NAME, data)

    # --- a cluster's topics ----------------------------------------------------------------

    async def adopt_topic_async(self, name: str, partitions: int, topic_id: uuid.UUID,
                                internal: bool = False, configs: dict | None = None) -> Topic:
        """The local logs of a topic the cluster created (ZooKeeper's assignment names it,
        with its id): `name` as it is, else created as ensure_topic_async does, with the
        cluster's topic id and its configs (/config/topics)."""
        if name not in self.topics and name not in self._creating:
            self._cluster_topic_ids[name] = topic_id  # taken by _new_topic
        try:
            return await self.ensure_topic_async(name, partitions, configs, internal=internal)
        finally:
            self._cluster_topic_ids.pop(name, None)

    def _new_topic(self, name: str, partitions: int, configs: dict | None,
                   internal: bool) -> tuple[Topic, LogConfig, bytes]:
        topic, lc, meta = super()._new_topic(name, partitions, configs, internal)
        cluster_id = self._cluster_topic_ids.pop(name, None)
        if cluster_id is not None:
            topic.topic_id = cluster_id
            meta = self._meta_bytes(topic)
        return topic, lc, meta

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
            cleanup_policy=e("cleanup.policy"),
            compression=target_codec(e),
            delete_retention_ms=e("delete.retention.ms"),
            min_cleanable_ratio=e("min.cleanable.dirty.ratio"),
            min_compaction_lag_ms=e("min.compaction.lag.ms"),
            max_compaction_lag_ms=e("max.compaction.lag.ms"),
            file_delete_delay_ms=e("file.delete.delay.ms"))

    @staticmethod
    def check_configs(configs: dict[str, str | None]) -> dict[str, str]:
        return check_topic_configs(configs)

    # --- periodic work --------------------------------------------------------------------

    def apply_retention(self, now_ms: int | None = None) -> int:
        return sum(p.apply_retention(now_ms) for p in self.all_partitions())

    def flush_by_time(self, now_ms: int) -> None:
        for p in self.all_partitions():
            p.maybe_flush_by_time(now_ms)
