# InitProducerId (key 22), v0-5.
#
# Idempotent producers (no transactional id) get a fresh producer id with epoch 0; ids are
# allocated from a persisted counter so none is reused after a restart (the next block of ids
# is persisted ahead, off the event loop). A request carrying an existing id/epoch (v3+,
# KIP-360) also gets a fresh id, which Kafka allows for non-transactional producers. In a
# ZooKeeper cluster ids come in blocks claimed from /latest_producer_id_block
# (cluster/producer_ids.py); when no block can be had (ZooKeeper unreachable) the answer is
# COORDINATOR_LOAD_IN_PROGRESS, retriable, as Kafka's ProducerIdManager without a block.
# A transactional id goes to the transaction coordinator (coordinator/transactions_coordinator.py):
# a new id, an epoch bump on re-init, KIP-360's bump for a known id/epoch, fencing of an older
# instance (an open transaction is aborted first: CONCURRENT_TRANSACTIONS, retried by the
# client), INVALID_TRANSACTION_TIMEOUT beyond transaction.max.timeout.ms.
# Version notes: before v4, PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH, as Kafka does;
# a producer id without an epoch (or the reverse) is INVALID_REQUEST, as Kafka checks it.
# Authorization first (KafkaApis): WRITE on the transactional id
# (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the cluster or
# WRITE on some topic (authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, to_ms
from ..registry import api
from ...security.acl_check import by_resource_type, check, cluster
from ...security.acls import Operation, ResourceType


@api(22, "InitProducerId", (0, 5))
async def handle(ctx, req):
    cls = response_class(22, ctx.api_version)
    pid, epoch = getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1)
    txn_id = req.transactional_id
    if txn_id is not None and not check(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                        txn_id):
        return make(cls, throttle_time=ZERO, producer_id=-1, producer_epoch=-1,
                    error_code=ErrorCode.transactional_id_authorization_failed)
    if txn_id is None and not cluster(ctx, Operation.IDEMPOTENT_WRITE) and \
            not by_resource_type(ctx, Operation.WRITE, ResourceType.TOPIC):
        return make(cls, throttle_time=ZERO, producer_id=-1, producer_epoch=-1,
                    error_code=ErrorCode.cluster_authorization_failed)
    if (pid == -1) != (epoch == -1):
        return make(cls, throttle_time=ZERO, error_code=ErrorCode.invalid_request,
                    producer_id=-1, producer_epoch=-1)
    try:  # a cluster's next id block may be unavailable (ZooKeeper): the error, retriable
        if req.transactional_id is None:
            pid = await ctx.broker.pids.allocate()
            return make(cls, throttle_time=ZERO, error_code=ErrorCode.none, producer_id=pid,
                        producer_epoch=0)
        err, pid, epoch = await ctx.broker.transactions.init_producer_id(
            req.transactional_id, to_ms(req.transaction_timeout),
            None if pid == -1 else (pid, epoch))
    except KafkaError as e:
        return make(cls, throttle_time=ZERO, error_code=e.code, producer_id=-1,
                    producer_epoch=-1)
    if err == ErrorCode.producer_fenced and ctx.api_version < 4:
        err = ErrorCode.invalid_producer_epoch
    return make(cls, throttle_time=ZERO, error_code=err, producer_id=pid, producer_epoch=epoch)
