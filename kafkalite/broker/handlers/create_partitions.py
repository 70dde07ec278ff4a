# CreatePartitions (key 37), v0-3.
#
# Raises a topic's partition count; the new partitions start empty with the topic's configs.
# Errors and messages follow Kafka's ReplicationControlManager.createPartitions (3.9): an
# unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a count equal to or below the current one is
# INVALID_PARTITIONS ("Topic already has N partition(s)." / "... would not be an
# increase."); manual assignments must number exactly the partitions added and each place its
# partition on this node alone (INVALID_REPLICA_ASSIGNMENT); a name listed twice is
# INVALID_REQUEST. validate_only checks everything and changes nothing. Adding more than
# 10000 partitions in one request is refused with POLICY_VIOLATION, as Kafka's controller
# refuses an oversized batch. Keys of existing records keep their partition; clients see the
# new count at their next metadata refresh. The timeout is ignored: the answer waits for the
# new partitions and the metadata file, written durably off the event loop.
# In a ZooKeeper cluster only the controller grows topics (cluster/zk_admin.py), others
# answer NOT_CONTROLLER; the answer waits, within timeout_ms, for the new partitions' states.
from __future__ import annotations

from collections import Counter

from ...cluster import zk_admin
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType
from .create_topics import MAX_PARTITIONS_PER_REQUEST, validate_replicas


def _additional(broker, t) -> int:
    topic = broker.logs.get(t.name)
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
    current = len(topic.partitions)
    if t.count == current:
        raise KafkaError(ErrorCode.invalid_partitions,
                         f"Topic already has {current} partition(s).")
    if t.count < current:
        raise KafkaError(ErrorCode.invalid_partitions,
                         f"The topic {t.name} currently has {current} partition(s); {t.count} "
                         "would not be an increase.")
    additional = t.count - current
    if t.assignments is not None:
        if len(t.assignments) != additional:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(t.assignments)} assignment(s) were specified.")
        for a in t.assignments:
            validate_replicas(a.broker_ids, broker.node_id, 1)
    return additional


@api(37, "CreatePartitions", (0, 3))
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    mod = response_module(37, v)
    controller = zk_admin.controller_of(b)
    if controller is not None and not controller.active:  # Kafka's ZooKeeper-mode KafkaApis
        return make(response_class(37, v), throttle_time=ZERO, results=tuple(
            mod.CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.not_controller,
                                            error_message=None) for t in req.topics))
    counts = Counter(t.name for t in req.topics)
    # As Kafka 3.8's ControllerApis.createPartitions answers (measured in
    # test_acl_enforcement.py): names listed twice first, INVALID_REQUEST, never authorized;
    # then the topics refused ALTER; then the others, in request order. (Kafka lists the
    # duplicates in its hash set's order; here in order of first mention.)
    rows: list[tuple[str, ErrorCode, str | None]] = [
        (name, ErrorCode.invalid_request, "Duplicate topic name.")
        for name, n in counts.items() if n > 1]
    added = 0
    refused = denied(ctx, Operation.ALTER, ResourceType.TOPIC,
                     (n for n, c in counts.items() if c == 1))
    rows += [(n, ErrorCode.topic_authorization_failed, None) for n in counts if n in refused]
    for t in req.topics:
        if counts[t.name] > 1 or t.name in refused:
            continue
        try:
            if controller is not None:  # ZooKeeper's count and brokers, by the controller
                await zk_admin.create_partitions(b, t, req.validate_only)
                rows.append((t.name, ErrorCode.none, None))
                continue
            extra = _additional(b, t)
            if added + extra > MAX_PARTITIONS_PER_REQUEST:
                raise KafkaError(ErrorCode.policy_violation,
                                 "Unable to perform excessively large batch operation.")
            added += extra
            if not req.validate_only:
                await b.add_partitions(t.name, t.count)
        except KafkaError as e:
            rows.append((t.name, e.code, e.message))
        except OSError as e:
            rows.append((t.name, ErrorCode.kafka_storage_error, str(e)))
        else:
            rows.append((t.name, ErrorCode.none, None))
    if controller is not None and not req.validate_only:
        grown = [n for n, c, _m in rows if c == ErrorCode.none]
        late = await zk_admin.settle(b, zk_admin.wait_for_states(b, grown),
                                     zk_admin.timeout_ms(req))
        rows = [(n, ErrorCode.request_timed_out, None) if n in late else (n, c, m)
                for n, c, m in rows]
    return make(response_class(37, v), throttle_time=ZERO, results=tuple(
        mod.CreatePartitionsTopicResult(name=n, error_code=c, error_message=m)
        for n, c, m in rows))
