# ListGroups (key 16), v0-5.
#
# Every group this broker coordinates (all of them), Dead ones excluded. While the offsets
# topic is loading the groups known so far come with COORDINATOR_LOAD_IN_PROGRESS, as Kafka.
# Version notes: v4+ filter by state (case-insensitive) and answer each group's state; v5+
# filter by type and answer it: "classic", or "consumer" for KIP-848 groups (protocol type
# "consumer", their states Empty/Assigning/Reconciling/Stable), as Kafka 4.x; KIP-932 share
# groups with protocol type and type "share" (states Empty/Stable), as Kafka 4.x.
# Authorization: DESCRIBE on the cluster lists all; otherwise only the groups the principal
# may DESCRIBE.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, denied
from ...security.acls import Operation, ResourceType


@api(16, "ListGroups", (0, 5))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(16, v)
    coord = ctx.broker.groups
    states = {s.lower() for s in getattr(req, "states_filter", ())}
    types = {t.lower() for t in getattr(req, "types_filter", ())}
    err, groups = coord.list_groups(states, set())
    consumer = coord.consumer_groups
    listed = [] if types and "classic" not in types else [
        make(mod.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "",
             group_state=g.state.value, group_type="classic")
        for g in groups if g.group_id not in consumer]
    if not coord.closed and (not types or "consumer" in types):
        listed += [make(mod.ListedGroup, group_id=gid, protocol_type="consumer",
                        group_state=g.state(), group_type="consumer")
                   for gid, g in consumer.items()
                   if not states or g.state().lower() in states]
    share = ctx.broker.share_groups
    if share is not None and not coord.closed and (not types or "share" in types):
        listed += [make(mod.ListedGroup, group_id=gid, protocol_type="share",
                        group_state=state, group_type="share")
                   for gid, state in share.list_groups()
                   if not states or state.lower() in states]
    if not cluster(ctx, Operation.DESCRIBE):  # else only the groups it may DESCRIBE
        refused = denied(ctx, Operation.DESCRIBE, ResourceType.GROUP,
                         (g.group_id for g in listed))
        listed = [g for g in listed if g.group_id not in refused]
    return make(response_class(16, v), throttle_time=ZERO, error_code=err,
                groups=tuple(listed))
