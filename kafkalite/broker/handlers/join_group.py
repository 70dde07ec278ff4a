# JoinGroup (key 11), v0-9.
#
# Joins the classic rebalance protocol (coordinator/groups_membership.py); the answer waits
# for the join phase to end, on a future, never a poll. Version notes: v0 has no rebalance
# timeout (the session timeout stands in, as Kafka); v4+ dynamic members joining with an
# empty member id get MEMBER_ID_REQUIRED and a member id first (KIP-394), older versions
# join at once; v5+ carries group.instance.id (static membership, KIP-345); v7+ answers the
# protocol type; v9 may tell a restarted static leader to skip assignment. v0/v1 stay
# advertised (KAFKA-19444). The client host is the peer address as Kafka writes it ("/ip").
# A KIP-848 consumer group of the same id: an empty one gives the id back to the classic
# protocol; one with members takes the member in as a classic member (online migration,
# coordinator/consumer_group_classic.py, routed by the group coordinator).
# A KIP-932 share group's id answers INCONSISTENT_GROUP_PROTOCOL with an empty member id, as
# Kafka 4.x's classicGroupJoin.
# READ on the group, else GROUP_AUTHORIZATION_FAILED. Gaps: the reason (v8+) is only logged.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module, to_ms
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType


@api(11, "JoinGroup", (0, 9))
async def handle(ctx, req):
    v = ctx.api_version
    session_ms = to_ms(req.session_timeout)
    rebalance_ms = to_ms(req.rebalance_timeout) if v >= 1 else session_ms
    host = "/" + ctx.peer.rpartition(":")[0] if ":" in ctx.peer else ctx.peer
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    denied = not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id)
    if denied or ctx.broker.groups.group_type(req.group_id) == "share":
        return make(response_class(11, v), throttle_time=ZERO,
                    error_code=ErrorCode.group_authorization_failed if denied
                    else ErrorCode.inconsistent_group_protocol, generation_id=-1,
                    protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                    skip_assignment=False, member_id="", members=())
    result = await ctx.broker.groups.join_group(
        req.group_id, req.member_id, getattr(req, "group_instance_id", None), v >= 4, v >= 9,
        ctx.client_id or "", host, rebalance_ms, session_ms, req.protocol_type, protocols,
        getattr(req, "reason", None))
    mod = response_module(11, v)
    members = tuple(make(mod.JoinGroupResponseMember, member_id=mid, group_instance_id=iid,
                         metadata=meta) for mid, iid, meta in result.members)
    name = result.protocol_name
    return make(response_class(11, v), throttle_time=ZERO, error_code=result.error,
                generation_id=result.generation, protocol_type=result.protocol_type,
                protocol_name=name if name is not None or v >= 7 else "",
                leader=result.leader, skip_assignment=result.skip_assignment,
                member_id=result.member_id, members=members)
