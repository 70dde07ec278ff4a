# Topic creation and partition growth as Kafka's ZooKeeper-mode admin path writes them
# (AdminZkClient.createTopicWithAssignment / addPartitions): the topic's config under
# /config/topics/<t> first, then its replica assignment under /brokers/topics/<t>. Nothing
# else: the controller, watching /brokers/topics, creates the partitions' state znodes (leader,
# ISR) when the assignment appears or grows. Any broker can run these; the znode create is
# the arbiter between two creators of one topic (NodeExists -> TOPIC_ALREADY_EXISTS).
from __future__ import annotations

import asyncio
import uuid
from typing import Mapping, Sequence

from ..log.datadir import uuid_b64
from ..wire.errors import ErrorCode, KafkaError
from . import zkdata
from .decisions import assign_replicas
from .zk import BadVersion, Delete, NodeExists, NoNode, ZkClient

UPDATE_ATTEMPTS = 5  # bounded retries of a conditional assignment update that lost a race


async def registered_brokers(zk: ZkClient) -> dict[int, str | None]:
    """{broker id: rack} of every broker registered under /brokers/ids (Kafka's
    getBrokerMetadatas: the placement candidates)."""
    ids = [int(c) for c in await zk.children(zkdata.BROKER_IDS) if c.isdigit()]

    async def rack(b: int) -> str | None | bool:
        try:
            data, _ = await zk.get(zkdata.broker_path(b))
        except NoNode:  # left between the listing and the read
            return False
        return zkdata.BrokerRegistration.decode(b, data).rack
    racks = await asyncio.gather(*(rack(b) for b in ids))
    return {b: r for b, r in sorted(zip(ids, racks)) if r is not False}  # type: ignore[misc]


def new_topic_id() -> str:
    """Kafka's Uuid.randomUuid: never one whose string starts with '-' (a command-line
    option lookalike)."""
    for _ in range(100):
        text = uuid_b64(uuid.uuid4())
        if not text.startswith("-"):
            return text
    raise RuntimeError("no topic id")  # pragma: no cover - 2^-600


def _placement(brokers: Mapping[int, str | None], partitions: int, replication_factor: int,
               start_index: int = -1, shift: int = -1,
               start_partition: int = 0) -> dict[int, list[int]]:
    ids = sorted(brokers)
    racks = {b: r for b, r in brokers.items() if r is not None}
    return assign_replicas(ids, racks or None, partitions, replication_factor, start_index,
                           shift, start_partition)


def validate_assignment(assignment: Mapping[int, Sequence[int]], first_partition: int,
                        brokers: Mapping[int, str | None]) -> None:
    """Kafka's checks on an explicit assignment: partitions numbered consecutively from
    first_partition, replicas distinct, one replication factor, every broker registered."""
    if sorted(assignment) != list(range(first_partition, first_partition + len(assignment))):
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "Unexpected existing replica assignment for topic, partitions "
                         f"must start at {first_partition} and be consecutive.")
    factors = {len(r) for r in assignment.values()}
    if len(factors) > 1:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "All partitions should have the same number of replicas")
    for p, replicas in assignment.items():
        if not replicas:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Duplicate replica assignment found: {list(replicas)}")
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "Unknown broker(s) in replica assignment: "
                             f"{', '.join(map(str, unknown))}.")


async def plan_topic(zk: ZkClient, name: str, partitions: int, replication_factor: int,
                     assignment: Mapping[int, Sequence[int]] | None = None,
                     racks: Mapping[int, str | None] | None = None) -> dict[int, list[int]]:
    """The replicas a new topic would get, after Kafka's checks (AdminZkClient.
    validateTopicCreate): TOPIC_ALREADY_EXISTS, a name colliding once '.' and '_' are unified
    (INVALID_TOPIC_EXCEPTION), then the assignment's or the placement's refusals. No write."""
    topics = await zk.children(zkdata.TOPICS)
    if name in topics:
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    folded = name.replace(".", "_")
    colliding = [t for t in topics if t.replace(".", "_") == folded]
    if colliding:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"Topic '{name}' collides with existing topics: "
                         f"{', '.join(colliding)}")
    brokers = dict(racks) if racks is not None else await registered_brokers(zk)
    if assignment is not None:
        validate_assignment(assignment, 0, brokers)
        return {p: list(r) for p, r in assignment.items()}
    return _placement(brokers, partitions, replication_factor)


async def create_topic(zk: ZkClient, name: str, partitions: int, replication_factor: int,
                       configs: Mapping[str, str] | None = None,
                       assignment: Mapping[int, Sequence[int]] | None = None,
                       racks: Mapping[int, str | None] | None = None) -> zkdata.TopicAssignment:
    """Write a new topic: its config, then its assignment with a fresh topic id. `racks`
    ({broker id: rack or None}) are the placement candidates, by default the registered
    brokers. Raises TOPIC_ALREADY_EXISTS when /brokers/topics/<name> exists."""
    placed = await plan_topic(zk, name, partitions, replication_factor, assignment, racks)
    # The config first, as Kafka: a controller that sees the assignment finds its config
    config_path = zkdata.topic_config_path(name)
    encoded = zkdata.encode_topic_config(dict(configs or {}))
    try:
        await zk.create(config_path, encoded, makepath=True)
    except NodeExists:  # a leftover of a deleted topic (Kafka's setOrCreateEntityConfigs)
        await zk.set(config_path, encoded)
    topic = zkdata.TopicAssignment({p: tuple(r) for p, r in sorted(placed.items())},
                                   new_topic_id())
    try:
        await zk.create(zkdata.topic_path(name), topic.encode(), makepath=True)
    except NodeExists:
        raise KafkaError(ErrorCode.topic_already_exists,
                         f"Topic '{name}' already exists.") from None
    return topic


async def create_partitions(zk: ZkClient, name: str, total: int,
                            assignment: Mapping[int, Sequence[int]] | None = None,
                            racks: Mapping[int, str | None] | None = None,
                            validate_only: bool = False) -> zkdata.TopicAssignment:
    """Grow the topic to `total` partitions (Kafka's AdminZkClient.addPartitions): the new
    partitions' replicas continue the round-robin from partition 0's first replica, unless
    `assignment` names them. A conditional write on the assignment's znode version;
    validate_only: every check, no write."""
    brokers = dict(racks) if racks is not None else await registered_brokers(zk)
    for _ in range(UPDATE_ATTEMPTS):
        try:
            data, st = await zk.get(zkdata.topic_path(name))
        except NoNode:
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"The topic '{name}' does not exist.") from None
        current = zkdata.TopicAssignment.decode(data)
        existing = len(current.partitions)
        if total == existing:  # ZkAdminManager.createPartitions
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"Topic already has {existing} partitions.")
        if total < existing:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"Topic currently has {existing} partitions, which is higher than "
                             f"the requested {total}.")
        if current.adding or current.removing:
            raise KafkaError(ErrorCode.reassignment_in_progress,
                             f"A partition reassignment is in progress for the topic '{name}'.")
        if assignment is not None:
            validate_assignment(assignment, existing, brokers)
            added = {p: list(r) for p, r in assignment.items()}
            if len(added) != total - existing:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"Increasing the number of partitions by "
                                 f"{total - existing} but {len(added)} assignments provided.")
        else:
            ids = sorted(brokers)
            first = current.partitions[0][0]
            start = max(0, next((i for i, b in enumerate(ids) if b >= first), 0))
            added = _placement(brokers, total - existing, len(current.partitions[0]),
                               start, start, existing)
        grown = zkdata.TopicAssignment(
            {**current.partitions, **{p: tuple(r) for p, r in added.items()}},
            current.topic_id, current.adding, current.removing)
        if validate_only:
            return grown
        try:
            await zk.set(zkdata.topic_path(name), grown.encode(), st.version)
            return grown
        except BadVersion:  # another writer changed the assignment: look again
            continue
    raise KafkaError(ErrorCode.invalid_partitions,
                     f"The assignment of '{name}' kept changing: try again")


async def mark_for_deletion(zk: ZkClient, name: str) -> None:
    """Kafka's AdminZkClient.deleteTopic: the child /admin/delete_topics/<name>, which the
    controller acts on. UNKNOWN_TOPIC_OR_PARTITION when the topic does not exist."""
    if await zk.exists(zkdata.topic_path(name)) is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         "This server does not host this topic-partition.")
    try:
        await zk.create(zkdata.delete_topic_path(name), makepath=True)
    except NodeExists:  # marked already: TopicDeletionManager acts once
        pass


async def delete_topic_znodes(zk: ZkClient, name: str, epoch_zk_version: int) -> None:
    """The controller's completeDeleteTopic: the topic's assignment with its partition
    states, its config and the deletion mark, in one multi fenced by the controller epoch
    (so a deposed controller deletes nothing). Raises ControllerMoved when fenced."""
    topic = zkdata.topic_path(name)
    ops: list = []
    try:
        for p in await zk.children(f"{topic}/partitions"):
            base = f"{topic}/partitions/{p}"
            ops += [Delete(f"{base}/{c}") for c in await zk.children(base)] + [Delete(base)]
        ops.append(Delete(f"{topic}/partitions"))
    except NoNode:  # no partition state written yet
        pass
    for path in (topic, zkdata.topic_config_path(name), zkdata.delete_topic_path(name)):
        if await zk.exists(path) is not None:
            ops.append(Delete(path))
    if ops:
        await zk.multi_fenced(ops, epoch_zk_version)
