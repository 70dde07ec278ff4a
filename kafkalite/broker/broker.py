# The broker: state shared by all handlers, and request dispatch (bytes in, buffers out).
#
# dispatch() is sans-I/O: server.py hands it a frame and writes back what it returns.
# A frame that cannot be parsed, an unknown API key, or an unsupported version of an API
# other than ApiVersions raises MalformedRequest: the server closes that connection, as
# Apache Kafka does. ApiVersions at an unknown version is answered at v0 with
# UNSUPPORTED_VERSION and the supported list so that the client can retry.
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..clock import Clock, SystemClock
from ..config import BrokerConfig
from ..coordinator.groups_coordinator import GroupCoordinator
from ..coordinator.producers import PartitionProducers, ProducerIdAllocator
from ..log.flusher import fsync_all
from ..log.manager import LogManager, Topic
from ..log.partition import PartitionLog
from ..wire.codec import decode_request, encode, is_flexible
from ..wire.errors import ErrorCode, KafkaError, MalformedRequest
from ..wire.header import parse_fixed, response_header, skip_tagged_fields
from .fetch_sessions import FetchSessionCache
from .registry import HANDLERS
from .stats import BrokerStats
from .waiters import AppendNotifier

log = logging.getLogger("kafkalite.broker")

API_VERSIONS_KEY = 18


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None):
        from . import handlers  # noqa: F401  (registers every handler module)
        self.config = config
        self.node_id = config.node_id
        self.host, self.port = config.advertised()
        self.logs = LogManager(config)
        self.notifier = AppendNotifier()
        self.pids: ProducerIdAllocator | None = None
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.groups: GroupCoordinator | None = None  # set by open()
        self.fetch_sessions = FetchSessionCache()
        self.stats = BrokerStats()
        # Called with a topic's name after it is deleted (committed offsets, sessions…).
        self.topic_deleted_listeners: list[Callable[[str], None]] = []
        self.started_at = time.time()
        self.closing = False

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        self.logs.open()
        state_dir = os.path.join(self.logs.data_dir, ".kafkalite")
        self.pids = ProducerIdAllocator(os.path.join(state_dir, "producer-ids"))
        for p in self.logs.all_partitions():
            self._load_producer_state(p)
        groups = GroupCoordinator(self.config, self.logs, self.create_topic,
                                  self.notifier.notify, lambda: self.closing)
        self.topic_deleted_listeners.append(groups.on_topic_deleted)
        self.groups = groups
        groups.open()

    def close(self, clean: bool = True) -> None:
        self.closing = True
        self.notifier.wake_all()
        if self.groups is not None:
            self.groups.close()
        if clean:
            for p in self.logs.all_partitions():
                self.producer_state(p).save(p.directory, p.log_end_offset)
        self.logs.close(clean=clean)

    def _load_producer_state(self, p: PartitionLog) -> None:
        state = PartitionProducers()
        start = state.load(p.directory)
        if start > p.log_end_offset:  # the log lost its tail: rebuild from scratch
            state = PartitionProducers()
            start = p.log_start_offset
        for h in p.iter_batch_headers(start):
            if h.producer_id >= 0 and h.base_offset >= start:
                state.update(h.producer_id, h.producer_epoch, h.base_sequence,
                             h.last_offset_delta, h.base_offset)
        p.producer_state = state

    def producer_state(self, p: PartitionLog) -> PartitionProducers:
        if p.producer_state is None:
            p.producer_state = PartitionProducers()
        return p.producer_state  # type: ignore[return-value]

    async def sync(self, partitions) -> None:
        """fsync what `partitions` hold (kafkalite.fsync.before.ack), off the event loop and
        on duplicated descriptors: a roll or retention running meanwhile on the loop may
        close the originals. Raises OSError."""
        fds = [fd for p in {id(p): p for p in partitions}.values() for fd in p.sync_handles()]
        await asyncio.get_running_loop().run_in_executor(None, fsync_all, fds)

    # --- topics ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict | None = None,
                     internal: bool = False) -> Topic:
        topic = self.logs.create_topic(name, partitions, configs, internal)
        for p in topic.partitions:
            p.producer_state = PartitionProducers()
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.logs.delete_topic(name)
        for listener in list(self.topic_deleted_listeners):
            listener(name)
        return topic

    def auto_create(self, name: str) -> Topic | None:
        """Create `name` with num.partitions if auto.create.topics.enable; else None."""
        groups = self.groups
        if name == "__consumer_offsets" and groups is not None:
            # Internal topics are created with their own settings (compacted,
            # offsets.topic.num.partitions), as Kafka's AutoTopicCreationManager does.
            return groups.store.ensure_topic()
        if not self.config["auto.create.topics.enable"]:
            return None
        return self.create_topic(name, self.config["num.partitions"])

    # --- dispatch -------------------------------------------------------------------------

    async def dispatch(self, frame: bytes, peer: str = "") -> list | None:
        """Answer one request frame (without its length prefix). Returns the response as a
        list of buffers (header first), or None when no response is due (acks=0)."""
        api_key, version, corr, client_id, pos = parse_fixed(frame)
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise MalformedRequest(f"unknown API key {api_key}")
        if not handler.min_version <= version <= handler.max_version:
            if api_key == API_VERSIONS_KEY:
                from .handlers.api_versions import unsupported_version_body
                return [response_header(corr, False), unsupported_version_body()]
            raise MalformedRequest(
                f"unsupported version {version} of {handler.name} "
                f"(supported {handler.min_version}-{handler.max_version})")
        if version < handler.decodable_from:
            assert handler.legacy is not None
            return [response_header(corr, False), handler.legacy(frame, pos, version)]
        flexible = is_flexible(api_key, version)
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        request = decode_request(api_key, version, frame, pos)
        ctx = RequestContext(self, api_key, version, corr, client_id, peer)
        started = time.perf_counter()
        result = await handler.fn(ctx, request)
        self.stats.request_done(api_key, version, time.perf_counter() - started)
        if result is None:
            return None
        head = response_header(corr, flexible and api_key != API_VERSIONS_KEY)
        if isinstance(result, list):
            return [head, *result]
        return [head, encode(result)]


def topic_error(name: str) -> KafkaError:
    return KafkaError(ErrorCode.unknown_topic_or_partition,
                      f"This server does not host this topic-partition: {name}")
