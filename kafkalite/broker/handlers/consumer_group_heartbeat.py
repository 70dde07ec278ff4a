# ConsumerGroupHeartbeat (key 68), v0-1.
#
# The KIP-848 consumer group protocol (group.protocol=consumer): join (epoch 0), heartbeat,
# leave (-1; -2 for a static member leaving for now); the broker computes the assignment
# (coordinator/consumer_group_coordinator.py) and hands each member its partitions once their
# previous owners have revoked them. Topic ids are translated here: owned partitions of topics
# this broker does not know are dropped. Errors carry Kafka's messages (FENCED_MEMBER_EPOCH,
# UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
# GROUP_ID_NOT_FOUND for a classic group with members, INVALID_REQUEST).
# Version notes: v0 lets the coordinator generate the member id when it is empty; v1 requires
# the client's (KIP-1082) and adds SubscribedTopicRegex (RE2 syntax in Kafka; google-re2 when
# installed, else Python's `re`: see COMPATIBILITY.md for where the two differ).
# ACLs (Kafka 4.x): READ on the group; DESCRIBE on each subscribed topic name
# (TOPIC_AUTHORIZATION_FAILED); a regex resolves only to topics the resolving member may
# DESCRIBE (GroupMetadataManager.refreshRegularExpressions), so a member is never assigned
# partitions of a topic its regex matches but it may not describe.
from __future__ import annotations

from typing import Callable

from ...coordinator.consumer_group_coordinator import (ConsumerGroupCoordinator, Heartbeat,
                                                       HeartbeatError)
from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, ms, response_module, to_ms
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType


def consumer_coordinator(broker) -> ConsumerGroupCoordinator:
    """The broker's KIP-848 coordinator, made with its classic one (whose registry, offsets
    store and clock it shares)."""
    return broker.groups.consumer_coordinator


def client_host(ctx) -> str:
    return "/" + ctx.peer.rpartition(":")[0] if ":" in ctx.peer else ctx.peer


def _refusal(ctx, req) -> tuple[ErrorCode, str | None] | None:
    """READ on the group, then DESCRIBE on every subscribed topic named (Kafka 4.x
    KafkaApis.handleConsumerGroupHeartbeat): GROUP_AUTHORIZATION_FAILED with its message,
    TOPIC_ without one. Kafka checks nothing else here: READ on the topics is Fetch's and
    OffsetCommit's to check; a regex's topics are filtered, not refused (_describable)."""
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return ErrorCode.group_authorization_failed, "Group authorization failed."
    if req.subscribed_topic_names and denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                                             req.subscribed_topic_names):
        return ErrorCode.topic_authorization_failed, None
    return None


def _describable(ctx) -> Callable[[set[str]], set[str]] | None:
    """What a regex this member's heartbeat resolves may include: the topics it may
    DESCRIBE (Kafka 4.x GroupMetadataManager.refreshRegularExpressions with the request's
    context); None without an authorizer."""
    if ctx.broker.authorizer is None:
        return None
    return lambda names: names - denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)


@api(68, "ConsumerGroupHeartbeat", (0, 1))
async def handle(ctx, req):
    v = ctx.api_version
    b = ctx.broker
    logs = b.logs
    owned = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            topic = logs.by_id.get(tp.topic_id)
            if topic is not None:
                owned[topic.name] = owned.get(topic.name, frozenset()) | frozenset(tp.partitions)
    hb = Heartbeat(req.group_id, req.member_id, req.member_epoch, req.instance_id, req.rack_id,
                   to_ms(req.rebalance_timeout), req.subscribed_topic_names,
                   getattr(req, "subscribed_topic_regex", None), req.server_assignor, owned,
                   ctx.client_id or "", client_host(ctx), v, _describable(ctx))
    cls = response_class(68, v)
    refusal = _refusal(ctx, req)
    if refusal is not None:
        return make(cls, throttle_time=ZERO, error_code=refusal[0], error_message=refusal[1],
                    member_id=None, member_epoch=0, heartbeat_interval=ZERO)
    try:
        answer = consumer_coordinator(b).heartbeat(hb)
    except HeartbeatError as e:
        return make(cls, throttle_time=ZERO, error_code=e.code, error_message=str(e) or None,
                    member_id=None, member_epoch=0, heartbeat_interval=ZERO)
    assignment = None
    if answer.assignment is not None:
        mod = response_module(68, v)
        assignment = mod.Assignment(topic_partitions=tuple(
            mod.TopicPartitions(topic_id=logs.topics[t].topic_id, partitions=tuple(sorted(ps)))
            for t, ps in sorted(answer.assignment.items()) if t in logs.topics))
    return make(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                member_id=answer.member_id, member_epoch=answer.member_epoch,
                heartbeat_interval=ms(answer.heartbeat_interval_ms), assignment=assignment)
