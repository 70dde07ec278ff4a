# Topics created on first use in a ZooKeeper cluster (issue 17), as Kafka 3.8's ZooKeeper-mode
# AutoTopicCreationManager does: the broker that got the request (FindCoordinator for the
# internal topics, Metadata for an ordinary topic with auto.create.topics.enable) writes the
# topic itself through the admin path (admin_zk.create_topic: /config/topics/<t>, then the
# assignment with Kafka's replica placement); the controller elects the leaders when the
# assignment appears, and every broker's view learns them by its watches. Kafka's checks
# first: a replication factor above the live brokers is INVALID_REPLICATION_FACTOR (no write;
# FindCoordinator answers COORDINATOR_NOT_AVAILABLE), a creation already under way from this
# broker is not started twice, a topic another broker created first is no error. The answer
# never waits for the leaders: the caller answers what the view shows now
# (COORDINATOR_NOT_AVAILABLE / LEADER_NOT_AVAILABLE until the partitions have leaders), and
# the client retries, as with Kafka.
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..wire.errors import ErrorCode, KafkaError
from . import admin_zk
from .zk import ZkError

log = logging.getLogger("kafkalite.cluster")


class AutoCreator:
    """One per broker: its creations under way, by topic name."""

    def __init__(self, broker: Any, zk: Any):
        self.broker = broker
        self.zk = zk
        self._inflight: dict[str, asyncio.Future] = {}

    async def create(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None) -> ErrorCode:
        """Write the topic unless the cluster has it: NONE when it exists or was written
        (now or by another broker), else Kafka's error for the creation."""
        view = self.broker.view
        if view.topic(name) is not None:
            return ErrorCode.none
        live = len(view.brokers(None))
        if live < replication_factor:
            log.info("Not creating %s: replication factor %d, %d live brokers", name,
                     replication_factor, live)
            return ErrorCode.invalid_replication_factor
        fut = self._inflight.get(name)
        if fut is None:
            fut = asyncio.ensure_future(self._write(name, partitions, replication_factor,
                                                    configs))
            self._inflight[name] = fut
            fut.add_done_callback(lambda _: self._inflight.pop(name, None))
        return await asyncio.shield(fut)

    async def _write(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None) -> ErrorCode:
        try:
            await admin_zk.create_topic(self.zk, name, partitions, replication_factor, configs)
        except KafkaError as e:
            if e.code == ErrorCode.topic_already_exists:
                return ErrorCode.none
            log.warning("Creating topic %s failed: %s", name, e)
            return e.code
        except ZkError as e:
            log.warning("Creating topic %s in ZooKeeper failed: %r", name, e)
            return ErrorCode.unknown_server_error
        log.info("Created topic %s in ZooKeeper (%d partitions, replication factor %d)",
                 name, partitions, replication_factor)
        return ErrorCode.none


def auto_creator(broker: Any) -> AutoCreator | None:
    """The broker's AutoCreator in a cluster, None on one node."""
    return getattr(broker, "auto_creator", None)
