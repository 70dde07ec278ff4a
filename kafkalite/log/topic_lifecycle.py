# The life of a topic on disk: its creation (partition directories and files, then the
# metadata file as the commit point), added partitions, config overrides written, and its
# deletion (the metadata file unlinked, then the partition directories renamed aside).
#
# The file work runs on one metadata worker thread, in the order it was submitted: a delete
# and a re-creation of the same name reach the disk in that order whichever caller submitted
# them. The requests (CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs) await that
# work; the memory state changes on the loop once it is done. A name is reserved from the
# moment its creation is accepted, so a second creation of it is refused meanwhile.
#
# TopicLifecycle is LogManager's (manager.py) half that does this; the other half loads the
# directory at start and looks topics up.
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

from ..fileio import atomic_write
from ..wire.errors import ErrorCode, KafkaError
from . import datadir
from .flusher import metadata_worker
from .partition import LogConfig, PartitionLog

log = logging.getLogger("kafkalite.log")
T = TypeVar("T")

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
    # The partition count the metadata file names once the queued writes are done (ahead of
    # len(partitions) while a CreatePartitions is under way), so that a config change
    # written meanwhile does not write back the old count.
    meta_partitions: int = 0
    # CreatePartitions and DeleteTopics of the topic take turns, as Kafka's controller
    # serializes them.
    turn: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


class TopicLifecycle:
    """The topic-lifecycle methods of LogManager, which provides what is declared here."""

    topics: dict[str, Topic]
    by_id: dict[uuid.UUID, Topic]
    meta_dir: str
    _register: Callable[[Topic], None]
    _open_partition: Callable[..., PartitionLog]
    log_config: Callable[[dict[str, str]], LogConfig]
    check_configs: Callable[[dict], dict[str, str]]

    def __init__(self) -> None:
        self._worker = metadata_worker()
        # The creations under way, by name: the name is taken, and auto-creation waits
        # for them.
        self._creating: dict[str, asyncio.Task[Topic]] = {}
        self._tasks: set[asyncio.Task] = set()

    # --- config overrides -----------------------------------------------------------------

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Apply new overrides at once (a request that follows builds on them) and write the
        metadata file durably on the metadata worker; done when it is written. Raises
        OSError when the write fails: the overrides are then taken back, unless a later
        change has replaced them meanwhile (its own write, after this one, says what holds)."""
        topic = self.topics[name]
        before, after = topic.configs, self.check_configs(configs)  # type: ignore[arg-type]
        self._use_configs(topic, after)
        written = self._on_worker(self._write_meta, topic.name, self._meta_bytes(topic))

        async def settle() -> None:
            try:
                await written
            except OSError:
                if topic.configs is after:
                    self._use_configs(topic, before)
                raise
        await self._detached(settle())

    def _use_configs(self, topic: Topic, configs: dict[str, str]) -> None:
        topic.configs = configs
        lc = self.log_config(configs)
        for p in topic.partitions:
            p.config = lc

    # --- creation, growth, deletion -------------------------------------------------------

    @staticmethod
    def _meta_bytes(topic: Topic) -> bytes:
        # Encoded on the loop: the worker never reads a Topic the loop may change meanwhile.
        return json.dumps({"name": topic.name, "topic_id": str(topic.topic_id),
                           "partitions": topic.meta_partitions, "configs": topic.configs,
                           "internal": topic.internal}, indent=1).encode()

    def _write_meta(self, name: str, data: bytes) -> None:
        """On the metadata worker: temporary file, fsync, rename, fsync of the directory."""
        atomic_write(os.path.join(self.meta_dir, name + ".json"), data)

    def validate_new_topic(self, name: str, partitions: int, configs: dict) -> dict[str, str]:
        validate_topic_name(name)
        if name in self.topics or name in self._creating:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        folded = name.replace(".", "_")
        for other in (*self.topics, *self._creating):
            if other.replace(".", "_") == folded:
                raise KafkaError(ErrorCode.invalid_topic_exception,
                                 f"Topic '{name}' collides with existing topic: {other}")
        if partitions < 1:
            raise KafkaError(ErrorCode.invalid_partitions,
                             "Number of partitions must be larger than 0.")
        return self.check_configs(configs)

    def _build(self, topic: Topic, lc: LogConfig, first: int, meta: bytes
               ) -> list[PartitionLog]:
        """On the metadata worker: open partitions `first`..meta_partitions-1, then write the
        metadata file naming them (the commit point: a crash before it leaves directories
        that the next start leaves alone, one after it a topic that the next start loads)."""
        made: list[PartitionLog] = []
        try:
            for p in range(first, topic.meta_partitions):
                made.append(self._open_partition(topic, p, lc, known=False))
            self._write_meta(topic.name, meta)
        except BaseException:
            for part in made:
                part.close()
            raise
        return made

    def _new_topic(self, name: str, partitions: int, configs: dict | None,
                   internal: bool) -> tuple[Topic, LogConfig, bytes]:
        checked = self.validate_new_topic(name, partitions, configs or {})
        topic = Topic(name, uuid.uuid4(), checked, internal=internal,
                      meta_partitions=partitions)
        return topic, self.log_config(checked), self._meta_bytes(topic)

    def _created(self, topic: Topic, parts: list[PartitionLog]) -> Topic:
        topic.partitions = parts
        self._register(topic)
        log.info("Created topic %s with %d partitions", topic.name, len(parts))
        return topic

    def create_topic(self, name: str, partitions: int, configs: dict | None = None,
                     internal: bool = False) -> Topic:
        """Blocking, for the callers that cannot await: the start (nothing serves yet),
        tests, and an internal topic's first write when no FindCoordinator came first. Still
        on the metadata worker, so that it stays ordered after a deletion queued there."""
        topic, lc, meta = self._new_topic(name, partitions, configs, internal)
        return self._created(topic, self._worker.submit(self._build, topic, lc, 0,
                                                        meta).result())

    async def create_topic_async(self, name: str, partitions: int,
                                 configs: dict | None = None, internal: bool = False
                                 ) -> Topic:
        """Create a topic without waiting on the loop: it exists (in memory, and durably
        on disk) when this returns. Raises KafkaError, OSError."""
        topic, lc, meta = self._new_topic(name, partitions, configs, internal)

        async def create() -> Topic:
            try:
                parts = await self._on_worker(self._build, topic, lc, 0, meta)
            finally:
                del self._creating[name]
            return self._created(topic, parts)
        self._creating[name] = creation = self._spawn(create())  # the name is taken
        return await asyncio.shield(creation)

    async def ensure_topic_async(self, name: str, partitions: int,
                                 configs: dict | None = None, internal: bool = False
                                 ) -> Topic:
        """`name` as it is, or once the creation under way is done, or else created as
        create_topic_async (auto-creation: every caller gets the one topic). Raises
        KafkaError, OSError (those of the creation it waited for, too)."""
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        pending = self._creating.get(name)
        if pending is None:
            return await self.create_topic_async(name, partitions, configs, internal)
        return await asyncio.shield(pending)

    async def add_partitions_async(self, name: str, total: int) -> list[PartitionLog]:
        """Raise `name`'s partition count to `total`; returns the new partitions."""
        return await self._detached(self._add_partitions(name, total))

    async def _add_partitions(self, name: str, total: int) -> list[PartitionLog]:
        topic = self._turn_of(name)
        async with topic.turn:
            if self.topics.get(name) is not topic:  # deleted while this request waited
                raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
            first = len(topic.partitions)
            if total <= first:
                raise KafkaError(ErrorCode.invalid_partitions,
                                 f"Topic already has {first} partition(s).")
            topic.meta_partitions = total
            try:
                made = await self._on_worker(self._build, topic,
                                             self.log_config(topic.configs), first,
                                             self._meta_bytes(topic))
            except BaseException:
                topic.meta_partitions = first
                raise
            topic.partitions.extend(made)
            return made

    async def delete_topic_async(self, name: str) -> Topic:
        """Delete a topic: it is gone from memory at once and from disk (durably) when this
        returns. The file work is the metadata worker's; only the closing of descriptors
        stays on the loop (in slices), where the partitions are used. Raises KafkaError."""
        return await self._detached(self._delete(name))

    async def _delete(self, name: str) -> Topic:
        topic = self._turn_of(name)
        async with topic.turn:
            if self.topics.get(name) is not topic:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
            del self.topics[name]
            self.by_id.pop(topic.topic_id, None)
            parts = list(topic.partitions)
            try:
                doomed = await self._on_worker(self._remove_files, name, parts)
            except OSError:
                if os.path.exists(os.path.join(self.meta_dir, name + ".json")):
                    self._register(topic)  # not deleted: it is still there after a restart
                raise
        log.info("Deleted topic %s", name)
        for i, p in enumerate(parts):
            for seg in p.segments:
                seg.close()
            if i % 64 == 63:
                await asyncio.sleep(0)  # other connections get their turn between slices
        remove_in_background(doomed, "delete-" + name)
        return topic

    def _remove_files(self, name: str, parts: list[PartitionLog]) -> list[str]:
        """On the metadata worker: the durable unlink of the metadata file (the commit
        point), then each partition directory renamed to <dir>.<id>-delete, as Kafka (the
        name is free for a new topic; the files go in the background, or at the next
        start). The open descriptors stay valid across the rename."""
        datadir.unlink_durably(os.path.join(self.meta_dir, name + ".json"))
        doomed = []
        for p in parts:
            error = p.durability.drain()  # nothing queued for it may outlive the topic
            if error is not None:
                log.error("Deleting %s-%d after a failed flush: %s", name, p.partition, error)
            target = datadir.set_aside_name(p.directory, "delete")
            try:
                os.rename(p.directory, target)
                doomed.append(target)
            except OSError:
                doomed.append(p.directory)
        return doomed

    def _turn_of(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
        return topic

    def _on_worker(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        return asyncio.wrap_future(self._worker.submit(fn, *args))

    def _detached(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """Run `coro` as a task of its own: a request whose connection closes meanwhile
        must not leave the memory state behind what the worker did on disk."""
        return asyncio.shield(self._spawn(coro))

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def remove_in_background(paths: list[str], name: str) -> None:
    threading.Thread(target=_remove_dirs, args=(paths,), name=name, daemon=True).start()


def _remove_dirs(paths: list[str]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
