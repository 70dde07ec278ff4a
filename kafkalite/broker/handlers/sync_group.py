# SyncGroup (key 14), v0-5.
#
# The leader hands in the assignments; every member's answer waits (on a future) until the
# leader's arrives, then carries its own assignment. Assignments naming members that are
# not in the group are ignored and members without one get an empty assignment, as Kafka
# does. The assignment is written to __consumer_offsets first (the GroupMetadata record); in a
# ZooKeeper cluster the answers wait until the ISR has it (offsets.commit.timeout.ms), and a
# write the ISR did not take fails every member as Kafka's storeGroup maps it
# (NOT_ENOUGH_REPLICAS(_AFTER_APPEND): COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER:
# NOT_COORDINATOR, REQUEST_TIMED_OUT: REBALANCE_IN_PROGRESS) and starts a rebalance. Version
# notes: v3+ carries group.instance.id; v5+ requires protocol type and name
# (missing: INCONSISTENT_GROUP_PROTOCOL, as Kafka) and answers them. READ on the group, else
# GROUP_AUTHORIZATION_FAILED (after that protocol check, as KafkaApis).
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType


@api(14, "SyncGroup", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    cls = response_class(14, v)
    ptype = getattr(req, "protocol_type", None)
    pname = getattr(req, "protocol_name", None)
    if v >= 5 and (ptype is None or pname is None):
        return make(cls, throttle_time=ZERO, error_code=ErrorCode.inconsistent_group_protocol,
                    protocol_type=None, protocol_name=None, assignment=b"")
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return make(cls, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed,
                    protocol_type=None, protocol_name=None, assignment=b"")
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    result = await ctx.broker.groups.sync_group(
        req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None),
        ptype, pname, assignments)
    return make(cls, throttle_time=ZERO, error_code=result.error,
                protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                assignment=result.assignment)
