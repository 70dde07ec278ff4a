# DescribeTransactions (key 65), v0.
#
# Each transactional id's state, producer id and epoch, timeout, start time (-1 when no
# transaction is open) and partitions, as Kafka's coordinator reports them; an unknown (or
# expiring) id is TRANSACTIONAL_ID_NOT_FOUND, "" INVALID_REQUEST, and while
# __transaction_state loads COORDINATOR_LOAD_IN_PROGRESS, each with only the id filled in.
from __future__ import annotations

import datetime

from ...wire.codec import response_class
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, ms, response_module
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@api(65, "DescribeTransactions", (0, 0))
async def handle(ctx, req):
    mod = response_module(65, ctx.api_version)
    states = []
    for txn_id in req.transactional_ids:
        if check(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            err, meta = ctx.broker.transactions.describe(txn_id)
        else:
            err, meta = E.transactional_id_authorization_failed, None
        if meta is None:
            # Kafka's defaults for the fields it leaves unset.
            states.append(mod.TransactionState(
                error_code=err, transactional_id=txn_id, transaction_state="",
                transaction_timeout=ZERO, transaction_start_time=_EPOCH, producer_id=0,
                producer_epoch=0, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        hidden = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                        (t for t, _ in meta.partitions))
        for topic, partition in sorted(tp for tp in meta.partitions if tp[0] not in hidden):
            by_topic.setdefault(topic, []).append(partition)
        states.append(mod.TransactionState(
            error_code=E.none, transactional_id=txn_id,
            transaction_state=meta.state.kafka_name, transaction_timeout=ms(meta.timeout_ms),
            transaction_start_time=_EPOCH + ms(meta.start_ms),
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=tuple(mod.TopicData(topic=t, partitions=tuple(p))
                         for t, p in by_topic.items())))
    return make(response_class(65, ctx.api_version), throttle_time=ZERO,
                transaction_states=tuple(states))
