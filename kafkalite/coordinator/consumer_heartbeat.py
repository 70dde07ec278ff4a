# A ConsumerGroupHeartbeat as the KIP-848 coordinator sees it (topic ids already names), its
# answer, and the checks made before any state changes: the request's shape and the member
# epoch (Kafka's GroupMetadataManager throwIfConsumerGroupHeartbeatRequestIsInvalid and
# throwIfConsumerGroupMemberEpochIsInvalid). No state, no clock.
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from ..wire.errors import ErrorCode
from .consumer_group import STATIC_LEAVE_EPOCH, Assignment, ConsumerMember, is_subset
from .consumer_subscriptions import InvalidRegex, compile_regex

log = logging.getLogger("kafkalite.coordinator")
E = ErrorCode


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class Heartbeat:
    """One ConsumerGroupHeartbeat request, topic ids already turned into names."""
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    # The topics among those given the member may DESCRIBE (None: no authorizer), for the
    # regexes this heartbeat resolves.
    describable: Callable[[set[str]], set[str]] | None = None


@dataclass
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None


def validate(hb: Heartbeat, assignors: list[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST with its
    messages, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION."""
    def bad(msg: str) -> HeartbeatError:
        return HeartbeatError(E.invalid_request, msg)
    if not hb.group_id:
        raise bad("GroupId can't be empty.")
    if not hb.member_id and (hb.version >= 1 or hb.member_epoch != 0):
        raise bad("MemberId can't be empty.")
    if hb.instance_id == "":
        raise bad("InstanceId can't be empty.")
    if hb.rack_id == "":
        raise bad("RackId can't be empty.")
    if hb.member_epoch == 0:
        if hb.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if hb.owned is None or hb.owned:
            raise bad("TopicPartitions must be empty when (re-)joining.")
        if hb.subscribed_names is None and hb.subscribed_regex is None:
            raise bad("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                      "first request.")
    elif hb.member_epoch == STATIC_LEAVE_EPOCH and hb.instance_id is None:
        raise bad("InstanceId can't be null.")
    elif hb.member_epoch < STATIC_LEAVE_EPOCH:
        raise bad("MemberEpoch is invalid.")
    if hb.server_assignor is not None and hb.server_assignor not in assignors:
        raise HeartbeatError(E.unsupported_assignor,
                             f"ServerAssignor {hb.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(assignors)}.")
    if hb.subscribed_regex:
        try:
            compile_regex(hb.subscribed_regex)
        except InvalidRegex as e:
            raise HeartbeatError(E.invalid_regular_expression,
                                 f"SubscribedTopicRegex `{hb.subscribed_regex}` is not a "
                                 f"valid regular expression: {e}.") from None


def check_epoch(member: ConsumerMember, hb: Heartbeat) -> None:
    received = hb.member_epoch
    if received > member.epoch or (received < member.epoch and (
            received != member.previous_epoch or not is_subset(hb.owned, member.assigned))):
        side = "greater" if received > member.epoch else "smaller"
        # Logged: a client that missed an epoch bump is refused here until its session ends,
        # which the log would otherwise show only as that session expiring.
        log.info("Consumer group member %s fenced at heartbeat: epoch %d, coordinator's %d "
                 "(previous %d), owned %s", member.member_id, received, member.epoch,
                 member.previous_epoch, None if hb.owned is None else
                 {t: sorted(ps) for t, ps in hb.owned.items()})
        raise HeartbeatError(
            E.fenced_member_epoch,
            f"The consumer group member has a {side} member epoch ({received}) than the "
            f"one known by the group coordinator ({member.epoch}). The member must "
            "abandon all its partitions and rejoin.")
