# FindCoordinator (key 10), v0-6.
#
# This broker is the coordinator of every group and every transactional id. The offsets
# topic is created on the first lookup of a group, __transaction_state on the first lookup of
# a transactional id (Kafka does the same, though it answers
# COORDINATOR_NOT_AVAILABLE until it exists; here it is created synchronously and the answer
# is immediate). Version notes: v1 adds key_type (0 group, 1 transaction); v4+ batches keys
# (coordinator_keys) and answers each; v6 knows key type 2 (share groups), which this broker
# does not serve: INVALID_REQUEST, as Kafka without a share coordinator. Any other key type
# is INVALID_REQUEST.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api

GROUP, TRANSACTION = 0, 1


def _lookup(ctx, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == GROUP:
        ctx.broker.groups.find_coordinator()
        return ErrorCode.none, None
    if key_type == TRANSACTION:
        ctx.broker.transactions.log.ensure_topic()
        return ErrorCode.none, None
    return ErrorCode.invalid_request, f"coordinator key type {key_type} is not supported"


@api(10, "FindCoordinator", (0, 6))
async def handle(ctx, req):
    v = ctx.api_version
    b = ctx.broker
    key_type = getattr(req, "key_type", GROUP)
    if v < 4:
        err, msg = _lookup(ctx, key_type)
        ok = err == ErrorCode.none
        return make(response_class(10, v), throttle_time=ZERO, error_code=err,
                    error_message=msg, node_id=b.node_id if ok else -1,
                    host=b.host if ok else "", port=b.port if ok else -1)
    mod = response_module(10, v)
    coords = []
    for key in req.coordinator_keys:
        err, msg = _lookup(ctx, key_type)
        ok = err == ErrorCode.none
        coords.append(mod.Coordinator(key=key, node_id=b.node_id if ok else -1,
                                      host=b.host if ok else "", port=b.port if ok else -1,
                                      error_code=err, error_message=msg))
    return make(response_class(10, v), throttle_time=ZERO, coordinators=tuple(coords))
