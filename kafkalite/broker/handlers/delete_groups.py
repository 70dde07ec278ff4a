# DeleteGroups (key 42), v0-2.
#
# Deletes Empty groups with their committed offsets (tombstones in __consumer_offsets).
# A group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, as Kafka.
# KIP-848 consumer groups likewise: an empty one is dropped with its offsets, one with
# members gets NON_EMPTY_GROUP. v2 is the flexible version; no behaviour changes between
# versions. A KIP-932 share group: an empty one is deleted with its share-partition state
# (tombstones in __share_group_state), one with members gets NON_EMPTY_GROUP. A group the
# principal may not DELETE answers GROUP_AUTHORIZATION_FAILED.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType
from .consumer_group_heartbeat import consumer_coordinator


@api(42, "DeleteGroups", (0, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(42, v)
    names = list(dict.fromkeys(req.groups_names))
    coord = ctx.broker.groups
    refused = denied(ctx, Operation.DELETE, ResourceType.GROUP, names)
    errors: dict = dict.fromkeys(refused, ErrorCode.group_authorization_failed)
    names, asked = [g for g in names if g not in refused], names
    share = {g for g in names if coord.group_type(g) == "share"
             and coord.check_status(g, allow_empty_id=True) is None}
    for g in names:
        if g in share:
            errors[g] = await ctx.broker.share_groups.delete_group(g)
            continue
        if g in coord.consumer_groups and coord.check_status(g, allow_empty_id=True) is None:
            errors[g] = consumer_coordinator(ctx.broker).delete(g)
    rest = [g for g in names if g not in share
            and (g not in errors or errors[g] == ErrorCode.none)]
    classic = coord.delete_groups(rest) if rest else {}
    for g, err in classic.items():
        # A consumer group without committed offsets has no classic twin to delete.
        errors[g] = ErrorCode.none if errors.get(g) == ErrorCode.none else err
    results = tuple(mod.DeletableGroupResult(group_id=g, error_code=errors[g]) for g in asked)
    return make(response_class(42, v), throttle_time=ZERO, results=results)
