# AddOffsetsToTxn (key 25), v0-4.
#
# Adds the group's __consumer_offsets partition to the producer's transaction, so that EndTxn's
# markers reach the offsets a TxnOffsetCommit writes there; the coordinator's checks and errors
# are AddPartitionsToTxn's. As Kafka, the partition is computed from
# offsets.topic.num.partitions whether or not the topic exists yet.
# Authorization first: WRITE on the transactional id, READ on the group (KafkaApis).
# Version notes: before v2, PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType


@api(25, "AddOffsetsToTxn", (0, 4))
async def handle(ctx, req):
    b = ctx.broker
    partition = ("__consumer_offsets", b.groups.store.partition_for(req.group_id))
    if not check(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        err = E.transactional_id_authorization_failed
    elif not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        err = E.group_authorization_failed
    else:
        err = await b.transactions.add_partitions(req.transactional_id, req.producer_id,
                                                  req.producer_epoch, [partition])
    if err == E.producer_fenced and ctx.api_version < 2:
        err = E.invalid_producer_epoch
    return make(response_class(25, ctx.api_version), throttle_time=ZERO, error_code=err)
