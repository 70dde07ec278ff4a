# ListGroups (key 16), v0-5.
#
# Every group this broker coordinates (all of them), Dead ones excluded. While the offsets
# topic is loading the groups known so far come with COORDINATOR_LOAD_IN_PROGRESS, as Kafka.
# Version notes: v4+ filter by state (case-insensitive) and answer each group's state; v5+
# filter by type and answer it: every group here is "classic", so a types filter without
# "classic" (e.g. "consumer", KIP-848 groups) matches nothing.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ..registry import api


@api(16, "ListGroups", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(16, v)
    err, groups = ctx.broker.groups.list_groups(
        set(getattr(req, "states_filter", ())), set(getattr(req, "types_filter", ())))
    listed = tuple(make(mod.ListedGroup, group_id=g.group_id,
                        protocol_type=g.protocol_type or "", group_state=g.state.value,
                        group_type="classic") for g in groups)
    return make(response_class(16, v), throttle_time=ZERO, error_code=err, groups=listed)
