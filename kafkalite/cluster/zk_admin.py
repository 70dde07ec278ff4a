# The admin APIs of a broker in a ZooKeeper-coordinated cluster, as Kafka 3.8's ZooKeeper-mode
# KafkaApis / ZkAdminManager serve them: only the active controller takes CreateTopics,
# CreatePartitions and DeleteTopics (every other broker answers NOT_CONTROLLER for each
# topic, before any other check); the controller writes Kafka's znodes (admin_zk) in its own
# queue (Controller.submit), so the write and the controller's reaction never interleave with
# its other work. The answer then waits, bounded by the request's timeout_ms, until the
# controller has written every new partition's state (Kafka's DelayedCreatePartitions waits
# for the leaders in its metadata) or deleted the topic (DelayedDeleteTopics); what is not
# settled by then answers REQUEST_TIMED_OUT, and the work goes on. timeout_ms <= 0 answers
# once the znodes are written. The handlers (create_topics.py, create_partitions.py,
# delete_topics.py) call in here when the broker runs a controller.
from __future__ import annotations

import asyncio
import base64
import dataclasses
import uuid
from typing import Any, Awaitable, Callable, Iterable

from ..wire.errors import ErrorCode, KafkaError
from . import admin_zk, zkdata
from .zk import ControllerMoved, ZkError

ZERO_UUID = uuid.UUID(int=0)


def controller_of(broker: Any) -> Any:
    """The broker's Controller in ZooKeeper mode, else None (single node)."""
    return getattr(broker, "controller", None)


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """Kafka's base64 topic id (the assignment znode's topic_id) as a UUID."""
    if not topic_id:
        return ZERO_UUID
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


async def on_controller(broker: Any, fn: Callable[[], Awaitable[Any]]) -> Any:
    """fn() in the controller's turn. A controller deposed meanwhile answers NOT_CONTROLLER
    (the client looks for the new one); a ZooKeeper failure UNKNOWN_SERVER_ERROR."""
    try:
        return await controller_of(broker).submit(fn)
    except ControllerMoved:
        raise KafkaError(ErrorCode.not_controller, None) from None
    except ZkError as e:
        raise KafkaError(ErrorCode.unknown_server_error, f"ZooKeeper: {e!r}") from None


def timeout_ms(req: Any) -> int:
    """The request's timeout (kio: a timedelta) in ms."""
    return int(req.timeout.total_seconds() * 1000)


async def settle(broker: Any, calls: dict[str, Callable[[], Awaitable[Any]]],
                 timeout_ms: int) -> set[str]:
    """Run each call in the controller's turn and wait for them, at most timeout_ms on the
    broker's clock; the names whose call failed or is still running then."""
    if timeout_ms <= 0 or not calls:
        return set()
    controller = controller_of(broker)
    futures = {name: asyncio.ensure_future(controller.submit(fn)) for name, fn in calls.items()}
    for fut in futures.values():  # a late failure is nobody's to hear: retrieve it
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    expired = asyncio.get_running_loop().create_future()
    timer = broker.clock.call_later(timeout_ms, lambda: expired.done() or
                                    expired.set_result(None))
    try:
        await asyncio.wait([expired, asyncio.ensure_future(
            asyncio.wait(list(futures.values())))], return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return {name for name, f in futures.items()
            if not f.done() or f.cancelled() or f.exception() is not None}


# --- CreateTopics -----------------------------------------------------------------------

def _shape(broker: Any, t: Any) -> tuple[int, int, dict[int, list[int]] | None]:
    """(partitions, replication factor, explicit assignment or None) with Kafka's defaults
    (num.partitions, default.replication.factor for -1)."""
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise KafkaError(ErrorCode.invalid_request,
                             "Both numPartitions or replicationFactor and replicasAssignments "
                             "were set. Both cannot be used at the same time.")
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        return len(assignment), len(next(iter(assignment.values()))), assignment
    cfg = broker.config
    partitions = cfg["num.partitions"] if t.num_partitions == -1 else t.num_partitions
    rf = cfg["default.replication.factor"] if t.replication_factor == -1 \
        else t.replication_factor
    return partitions, rf, None


async def create_topic(broker: Any, t: Any, configs: dict[str, str],
                       validate_only: bool) -> tuple[int, int, uuid.UUID]:
    """Create (or only check) one topic through the controller: (partitions, replication
    factor, topic id). Raises KafkaError with Kafka's code and message."""
    partitions, rf, assignment = _shape(broker, t)
    zk = controller_of(broker).zk
    if validate_only:
        placed = await on_controller(broker, lambda: admin_zk.plan_topic(
            zk, t.name, partitions, rf, assignment))
        return len(placed), len(next(iter(placed.values()))), ZERO_UUID
    created = await on_controller(broker, lambda: admin_zk.create_topic(
        zk, t.name, partitions, rf, configs, assignment))
    first = next(iter(created.partitions.values()))
    return len(created.partitions), len(first), topic_uuid(created.topic_id)


def wait_for_states(broker: Any, names: Iterable[str]) -> dict[str, Callable[[], Awaitable]]:
    """Calls that make the controller take in each topic now and fail unless every
    partition of it has its state (its leader) written."""
    controller = controller_of(broker)

    def call(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await controller.sync_topic(name)
            assignment = controller.topics.get(name)
            if assignment is None or any((name, p) not in controller.states
                                         for p in assignment.partitions):
                raise KafkaError(ErrorCode.request_timed_out, None)
        return run
    return {name: call(name) for name in names}


def with_replication_factor(result: Any, rf: int) -> Any:
    """A CreateTopics success row (built for one node) with the topic's replication factor."""
    if getattr(result, "replication_factor", -1) in (-1, rf):
        return result
    return dataclasses.replace(result, replication_factor=rf)


# --- CreatePartitions -------------------------------------------------------------------

async def create_partitions(broker: Any, t: Any, validate_only: bool) -> None:
    """Grow one topic through the controller (or only check it). Explicit assignments
    number the new partitions from the current count, read in the controller's turn."""
    zk = controller_of(broker).zk

    async def grow() -> zkdata.TopicAssignment:
        assignment = None
        if t.assignments is not None:
            try:
                data, _ = await zk.get(zkdata.topic_path(t.name))
            except admin_zk.NoNode:
                raise KafkaError(ErrorCode.unknown_topic_or_partition,
                                 f"The topic '{t.name}' does not exist.") from None
            start = len(zkdata.TopicAssignment.decode(data).partitions)
            assignment = {start + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
        return await admin_zk.create_partitions(zk, t.name, t.count, assignment,
                                                validate_only=validate_only)
    await on_controller(broker, grow)


# --- DeleteTopics -----------------------------------------------------------------------

async def resolve_deletions(broker: Any, items: list[tuple[str | None, uuid.UUID | None]]
                            ) -> tuple[list[tuple[str, uuid.UUID]], list[tuple]]:
    """(topics to delete as (name, id), error rows (name, id, code, message)) from
    ZooKeeper's topics: an unknown name UNKNOWN_TOPIC_OR_PARTITION, an unknown id
    UNKNOWN_TOPIC_ID; both or neither given INVALID_REQUEST."""
    zk = controller_of(broker).zk

    async def topic_ids() -> dict[str, uuid.UUID]:
        found = {}
        for name in await zk.children(zkdata.TOPICS):
            try:
                data, _ = await zk.get(zkdata.topic_path(name))
            except admin_zk.NoNode:
                continue
            found[name] = topic_uuid(zkdata.TopicAssignment.decode(data).topic_id)
        return found
    names = await on_controller(broker, topic_ids)
    ids = {tid: name for name, tid in names.items()}
    targets, rows = [], []
    for name, tid in items:
        if (name is None) == (tid is None):
            rows.append((name, tid or ZERO_UUID, ErrorCode.invalid_request,
                         "Neither topic name nor id were specified." if name is None
                         else "You may not specify both topic name and topic id."))
        elif tid is not None:
            if tid in ids:
                targets.append((ids[tid], tid))
            else:
                rows.append((None, tid, ErrorCode.unknown_topic_id,
                             "This server does not host this topic ID."))
        elif name in names:
            targets.append((name, names[name]))
        else:
            rows.append((name, ZERO_UUID, ErrorCode.unknown_topic_or_partition,
                         "This server does not host this topic-partition."))
    return targets, rows


async def delete_topics(broker: Any, targets: list[tuple[str, uuid.UUID]],
                        timeout_ms: int) -> list[tuple]:
    """Mark each topic for deletion (/admin/delete_topics/<t>), then let the controller
    delete them; rows (name, id, code, message)."""
    controller = controller_of(broker)
    rows, marked = [], []
    for name, tid in targets:
        try:
            await on_controller(broker,
                                lambda n=name: admin_zk.mark_for_deletion(controller.zk, n))
        except KafkaError as e:
            rows.append((name, tid, e.code, e.message))
        else:
            marked.append((name, tid))
    late = await settle(broker, {n: controller.delete_marked_topics for n, _ in marked},
                        timeout_ms)
    return rows + [(n, tid, ErrorCode.request_timed_out if n in late else ErrorCode.none, None)
                   for n, tid in marked]
