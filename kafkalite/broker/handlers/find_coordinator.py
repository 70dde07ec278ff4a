# FindCoordinator (key 10), v0-6.
#
# The coordinator of a group (transactional id) is the leader of its __consumer_offsets
# (__transaction_state) partition, Kafka's partitionFor, as the broker's cluster view knows
# it, answered at its endpoint on the request's listener; without a live leader,
# COORDINATOR_NOT_AVAILABLE. On one node that is always this broker. The offsets topic is
# created on the first lookup of a group, __transaction_state on the first lookup of a
# transactional id (Kafka does the same, though it answers COORDINATOR_NOT_AVAILABLE until it
# exists; on one node the answer waits for its creation, which does not hold the event loop).
# In a ZooKeeper cluster the broker that got the request writes the topic to ZooKeeper
# (cluster/auto_create.py, offsets.topic.replication.factor /
# transaction.state.log.replication.factor: fewer live brokers, no topic) and answers
# COORDINATOR_NOT_AVAILABLE until its view shows the partition's leader, as Kafka in
# ZooKeeper mode; that leader may still be loading the partition (its group requests answer
# COORDINATOR_LOAD_IN_PROGRESS, as Kafka's). Version notes: v1 adds key_type (0 group, 1
# transaction); v4+ batches keys (coordinator_keys) and answers each; v6 knows key type 2
# (share groups), which this broker does not serve: INVALID_REQUEST, as Kafka without a share
# coordinator. Any other key type is INVALID_REQUEST.
from __future__ import annotations

from typing import Any

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType
from ...coordinator.offsets_log import partition_for

GROUP, TRANSACTION = 0, 1
INTERNAL_TOPICS = {GROUP: "__consumer_offsets", TRANSACTION: "__transaction_state"}


async def _lookup(ctx, key_type: int, key: str) -> tuple[ErrorCode, str | None, Any]:
    # DESCRIBE on the group / transactional id first, as KafkaApis.getCoordinator.
    if key_type == GROUP and not check(ctx, Operation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, None, None
    if key_type == TRANSACTION and not check(ctx, Operation.DESCRIBE,
                                             ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed, None, None
    if key_type in INTERNAL_TOPICS:
        topic = await ctx.broker.internal_topic(INTERNAL_TOPICS[key_type])
        view = ctx.broker.view
        state = view.partition(topic.name, partition_for(key, len(view.partitions(
            topic.name)))) if topic is not None else None
        node = view.broker(state.leader, ctx.listener) if state is not None else None
        if node is None:
            return ErrorCode.coordinator_not_available, None, None
        return ErrorCode.none, OK, node
    # Kafka gives no reason of its own here: the error's default message.
    return ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE, None


OK = ""  # Kafka's success message from v4; "NONE" before
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the "
                           "client library or the message was sent to an incompatible broker. "
                           "See the broker logs for more details.")


@api(10, "FindCoordinator", (0, 6))
async def handle(ctx, req):
    v = ctx.api_version
    b = ctx.broker
    key_type = getattr(req, "key_type", GROUP)
    if v < 4:
        err, msg, node = await _lookup(ctx, key_type, req.key)
        msg = "NONE" if msg is OK else msg  # Kafka's Errors.NONE.message() before v4
        return make(response_class(10, v), throttle_time=ZERO, error_code=err,
                    error_message=msg, node_id=node.node_id if node else -1,
                    host=node.host if node else "", port=node.port if node else -1)
    mod = response_module(10, v)
    coords = []
    for key in req.coordinator_keys:
        err, msg, node = await _lookup(ctx, key_type, key)
        coords.append(mod.Coordinator(key=key, node_id=node.node_id if node else -1,
                                      host=node.host if node else "",
                                      port=node.port if node else -1,
                                      error_code=err, error_message=msg))
    return make(response_class(10, v), throttle_time=ZERO, coordinators=tuple(coords))
