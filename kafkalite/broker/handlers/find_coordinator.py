# FindCoordinator (key 10), v0-6.
#
# This broker is the coordinator of every group and every transactional id. The offsets
# topic is created on the first lookup of a group, __transaction_state on the first lookup
# of a transactional id (Kafka does the same, though it answers COORDINATOR_NOT_AVAILABLE
# until it exists; here the answer waits for its creation, which does not hold the event
# loop). Version notes: v1 adds key_type (0 group, 1 transaction); v4+ batches keys
# (coordinator_keys) and answers each; v6 knows key type 2 (share groups), which this broker
# does not serve: INVALID_REQUEST, as Kafka without a share coordinator. Any other key type
# is INVALID_REQUEST.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType
from ...security.listeners import endpoint

GROUP, TRANSACTION = 0, 1
INTERNAL_TOPICS = {GROUP: "__consumer_offsets", TRANSACTION: "__transaction_state"}


async def _lookup(ctx, key_type: int, key: str) -> tuple[ErrorCode, str | None]:
    # DESCRIBE on the group / transactional id first, as KafkaApis.getCoordinator.
    if key_type == GROUP and not check(ctx, Operation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, None
    if key_type == TRANSACTION and not check(ctx, Operation.DESCRIBE,
                                             ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed, None
    if key_type in INTERNAL_TOPICS:
        await ctx.broker.internal_topic(INTERNAL_TOPICS[key_type])
        return ErrorCode.none, OK
    # Kafka gives no reason of its own here: the error's default message.
    return ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE


OK = ""  # Kafka's success message from v4; "NONE" before
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the "
                           "client library or the message was sent to an incompatible broker. "
                           "See the broker logs for more details.")


@api(10, "FindCoordinator", (0, 6))
async def handle(ctx, req):
    v = ctx.api_version
    b = ctx.broker
    key_type = getattr(req, "key_type", GROUP)
    host, port = endpoint(ctx)  # the coordinator's address on the client's listener
    if v < 4:
        err, msg = await _lookup(ctx, key_type, req.key)
        msg = "NONE" if msg is OK else msg  # Kafka's Errors.NONE.message() before v4
        ok = err == ErrorCode.none
        return make(response_class(10, v), throttle_time=ZERO, error_code=err,
                    error_message=msg, node_id=b.node_id if ok else -1,
                    host=host if ok else "", port=port if ok else -1)
    mod = response_module(10, v)
    coords = []
    for key in req.coordinator_keys:
        err, msg = await _lookup(ctx, key_type, key)
        ok = err == ErrorCode.none
        coords.append(mod.Coordinator(key=key, node_id=b.node_id if ok else -1,
                                      host=host if ok else "", port=port if ok else -1,
                                      error_code=err, error_message=msg))
    return make(response_class(10, v), throttle_time=ZERO, coordinators=tuple(coords))
