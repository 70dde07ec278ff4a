# DeleteGroups (key 42), v0-2.
#
# Deletes Empty groups with their committed offsets (tombstones in __consumer_offsets).
# A group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, as Kafka.
# v2 is the flexible version; no behaviour changes between versions.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ..registry import api


@api(42, "DeleteGroups", (0, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(42, v)
    names = list(dict.fromkeys(req.groups_names))
    errors = ctx.broker.groups.delete_groups(names)
    results = tuple(mod.DeletableGroupResult(group_id=g, error_code=errors[g]) for g in names)
    return make(response_class(42, v), throttle_time=ZERO, results=results)
