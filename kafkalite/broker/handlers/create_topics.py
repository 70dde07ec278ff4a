# CreateTopics (key 19), v2-7 (Kafka 4.0 dropped v0-1).
#
# Checks each topic in the order of Kafka's KRaft controller (ReplicationControlManager and
# ControllerApis, 3.9): a name listed twice is INVALID_REQUEST; an illegal name or one that
# collides with an existing topic once '.' and '_' are unified is INVALID_TOPIC_EXCEPTION; an
# existing one TOPIC_ALREADY_EXISTS; null, unknown or invalid configs INVALID_CONFIG; then
# partitions and replicas. num_partitions -1 means num.partitions and replication_factor -1
# default.replication.factor (KIP-464). This is a one-broker cluster: a replication factor
# above 1 is INVALID_REPLICATION_FACTOR with the KRaft placer's message ("The target
# replication factor of N cannot be reached because only 1 broker(s) are registered.";
# ZooKeeper-era Kafka said "Replication factor: N larger than available brokers: 1."), and a
# manual assignment must place every partition 0..n-1 on exactly this node
# (INVALID_REPLICA_ASSIGNMENT otherwise). validate_only runs every check and creates nothing.
# v5+ successes carry the partition count, replication factor (1), and every config with its
# source; v7 the topic id (a fresh one even for validate_only, as Kafka). Like Kafka, a
# request creating over 10000 partitions is refused (POLICY_VIOLATION). The timeout is
# ignored: the answer waits for the creation, which runs off the event loop (the partition
# files and the metadata file, fsynced with its directory, on the log manager's metadata
# worker), so a topic answered NONE is still there after a crash.
# In a ZooKeeper cluster (zookeeper.connect) only the controller creates (cluster/zk_admin.py):
# others answer NOT_CONTROLLER; replicas are placed over the registered brokers (Kafka's
# "Replication factor: N larger than available brokers: M."), and the answer waits, within
# timeout_ms, until every partition has its state (REQUEST_TIMED_OUT after).
from __future__ import annotations

import uuid
from collections import Counter

from ...cluster import zk_admin
from ...config import TOPIC_PROPS, format_value
from ...log.manager import validate_topic_name
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, denied
from ...security.acls import Operation, ResourceType
from ._configs import creation_source, topic_value

MAX_PARTITIONS_PER_REQUEST = 10000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP
METADATA_TOPIC = "__cluster_metadata"


def _fold(name: str) -> str:
    return name.replace(".", "_")


def validate_replicas(broker_ids, node_id: int, expected: int | None) -> None:
    """One manual assignment (ReplicationControlManager.validateManualPartitionAssignment)."""
    if not broker_ids:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "The manual partition assignment includes an empty replica list.")
    prev = None
    for b in sorted(broker_ids):
        if b != node_id:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"The manual partition assignment includes broker {b}, but no "
                             "such broker is registered.")
        if b == prev:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"The manual partition assignment includes the broker {b} more "
                             "than once.")
        prev = b
    if expected is not None and len(broker_ids) != expected:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         f"The manual partition assignment includes a partition with "
                         f"{len(broker_ids)} replica(s), but this is not consistent with "
                         f"previous partitions, which have {expected} replica(s).")


def _partitions(broker, t) -> int:
    """The partition count the topic will get; raises for bad counts or replicas."""
    cfg = broker.config
    if t.assignments:
        if t.replication_factor != -1:
            raise KafkaError(ErrorCode.invalid_request,
                             "A manual partition assignment was specified, but replication "
                             "factor was not set to -1.")
        if t.num_partitions != -1:
            raise KafkaError(ErrorCode.invalid_request,
                             "A manual partition assignment was specified, but numPartitions "
                             "was not set to -1.")
        seen: set[int] = set()
        rf = None
        for a in t.assignments:
            if a.partition_index in seen:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 "Found multiple manual partition assignments for partition "
                                 f"{a.partition_index}")
            validate_replicas(a.broker_ids, broker.node_id, rf)
            rf = len(a.broker_ids)
            seen.add(a.partition_index)
        if seen != set(range(len(seen))):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "partitions should be a consecutive 0-based integer sequence")
        return len(seen)
    if t.replication_factor < -1 or t.replication_factor == 0:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         "Replication factor must be larger than 0, or -1 to use the default "
                         "value.")
    if t.num_partitions < -1 or t.num_partitions == 0:
        raise KafkaError(ErrorCode.invalid_partitions,
                         "Number of partitions was set to an invalid non-positive value.")
    rf = cfg["default.replication.factor"] if t.replication_factor == -1 \
        else t.replication_factor
    if rf > 1:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"Unable to replicate the partition {rf} time(s): The target "
                         f"replication factor of {rf} cannot be reached because only 1 "
                         "broker(s) are registered.")
    return cfg["num.partitions"] if t.num_partitions == -1 else t.num_partitions


def _check(broker, t, in_cluster: bool = False) -> tuple[int, dict[str, str]]:
    """(partitions, configs) of a topic that may be created; raises KafkaError otherwise.
    In a cluster the topics and the partition count are ZooKeeper's (zk_admin): 0 here."""
    logs = broker.logs
    name = t.name
    if name == METADATA_TOPIC:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Creation of internal topic {METADATA_TOPIC} is prohibited.")
    validate_topic_name(name)
    if name in logs.topics and not in_cluster:
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    for other in () if in_cluster else logs.topics:
        if _fold(other) == _fold(name):
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Topic '{name}' collides with existing topic: {other}")
    configs = {c.name: c.value for c in t.configs}
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_config,
                         "Null value not supported for topic configs: " + ",".join(nulls))
    checked = logs.check_configs(configs)
    return (0 if in_cluster else _partitions(broker, t)), checked


def _success(mod, broker, name: str, partitions: int, configs: dict[str, str],
             topic_id: uuid.UUID, hidden: set[str]):
    if name in hidden:  # no DESCRIBE_CONFIGS: the creation is told, not its shape
        return make(mod.CreatableTopicResult, name=name, topic_id=topic_id,
                    error_code=ErrorCode.none, error_message=None, num_partitions=-1,
                    replication_factor=-1, configs=(),
                    topic_config_error_code=ErrorCode.topic_authorization_failed)
    logs = broker.logs
    entries = () if not hasattr(mod, "CreatableTopicConfigs") else tuple(  # v5+
        mod.CreatableTopicConfigs(
            name=p.name, value=format_value(topic_value(logs, configs, p.name)),
            read_only=False, config_source=creation_source(broker.config, configs, p.name),
            is_sensitive=False)
        for p in sorted(TOPIC_PROPS, key=lambda p: p.name))
    return make(mod.CreatableTopicResult, name=name, topic_id=topic_id,
                error_code=ErrorCode.none, error_message=None, topic_config_error_code=0,
                num_partitions=partitions, replication_factor=1, configs=entries)


def _failure(mod, name: str, code: ErrorCode, message: str | None):
    return make(mod.CreatableTopicResult, name=name, topic_id=uuid.UUID(int=0),
                error_code=code, error_message=message, num_partitions=-1,
                replication_factor=-1, configs=())


def _unauthorized(ctx, names: list[str]) -> tuple[set[str], set[str]]:
    """(names refused, names whose configs the answer hides), as ControllerApis.createTopics:
    CREATE on the cluster or else on each topic; DESCRIBE_CONFIGS on the topic for its
    configs. The metadata topic is refused for its own reason first."""
    names = [n for n in names if n != METADATA_TOPIC]
    refused = set() if cluster(ctx, Operation.CREATE) else \
        denied(ctx, Operation.CREATE, ResourceType.TOPIC, names)
    return refused, denied(ctx, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)


async def _create_in_cluster(ctx, req, mod, planned, hidden) -> list:
    """The rows of the topics created through the controller (zk_admin), each answered
    once its partitions have their state or timeout_ms has passed (REQUEST_TIMED_OUT)."""
    b = ctx.broker
    rows, created = {}, []
    for t, configs in planned:
        try:
            n, rf, topic_id = await zk_admin.create_topic(b, t, configs, req.validate_only)
        except KafkaError as e:
            rows[t.name] = _failure(mod, t.name, e.code, e.message)
        else:
            rows[t.name] = zk_admin.with_replication_factor(
                _success(mod, b, t.name, n, configs, topic_id, hidden), rf)
            created.append(t.name)
    if not req.validate_only:
        for name in await zk_admin.settle(b, zk_admin.wait_for_states(b, created),
                                          zk_admin.timeout_ms(req)):
            rows[name] = _failure(mod, name, ErrorCode.request_timed_out, None)
    return list(rows.values())


@api(19, "CreateTopics", (2, 7))
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    mod = response_module(19, v)
    controller = zk_admin.controller_of(b)
    if controller is not None and not controller.active:  # Kafka's ZooKeeper-mode KafkaApis
        # (its rows keep the generated class's default message, "", as Kafka 3.8 answers)
        return make(response_class(19, v), throttle_time=ZERO, topics=tuple(
            _failure(mod, t.name, ErrorCode.not_controller, "") for t in req.topics))
    counts = Counter(t.name for t in req.topics)
    results = []
    planned = []
    unique = [n for n, c in counts.items() if c == 1]
    refused, hidden = _unauthorized(ctx, unique)
    for t in req.topics:
        if counts[t.name] > 1 or t.name in refused:
            continue
        try:
            planned.append((t.name, *_check(b, t, controller is not None)))
        except KafkaError as e:
            results.append(_failure(mod, t.name, e.code, e.message))
    if controller is not None:
        by_name = {t.name: t for t in req.topics}
        results += await _create_in_cluster(ctx, req, mod, [
            (by_name[name], configs) for name, _n, configs in planned], hidden)
        planned = []
    elif sum(p[1] for p in planned) > MAX_PARTITIONS_PER_REQUEST:
        results += [_failure(mod, name, ErrorCode.policy_violation,
                             "Unable to perform excessively large batch operation.")
                    for name, _n, _c in planned]
        planned = []
    for name, partitions, configs in planned:
        if req.validate_only:
            results.append(_success(mod, b, name, partitions, configs, uuid.uuid4(),
                                    hidden))
            continue
        try:
            topic = await b.create_topic_async(name, partitions, configs)
        except KafkaError as e:
            results.append(_failure(mod, name, e.code, e.message))
        except OSError as e:
            results.append(_failure(mod, name, ErrorCode.kafka_storage_error, str(e)))
        else:
            results.append(_success(mod, b, name, partitions, topic.configs,
                                    topic.topic_id, hidden))
    results += [_failure(mod, name, ErrorCode.invalid_request, "Duplicate topic name.")
                for name, n in counts.items() if n > 1]
    results += [_failure(mod, name, ErrorCode.topic_authorization_failed,
                         "Authorization failed.") for name in unique if name in refused]
    return make(response_class(19, v), throttle_time=ZERO, topics=tuple(results))
