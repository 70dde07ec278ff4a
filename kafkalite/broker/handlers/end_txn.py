# EndTxn (key 26), v0-4.
#
# Commits or aborts the producer's transaction: PrepareCommit/PrepareAbort is written to
# __transaction_state, the COMMIT/ABORT markers into every partition of the transaction, then
# CompleteCommit/CompleteAbort. Kafka answers once the Prepare record is written and writes
# the markers afterwards; kafkalite answers after the markers too (markers that fail are
# retried by the coordinator's tick, and the answer is still NONE, as Kafka's).
# Errors as Kafka 3.8: a retried EndTxn of a completed transaction NONE, of one completing
# CONCURRENT_TRANSACTIONS, the other outcome or no transaction INVALID_TXN_STATE, another
# epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), an unknown id/producer id
# INVALID_PRODUCER_ID_MAPPING. Gap: v5 (Kafka 4.0's KIP-890 part 2 epoch bump) is not served:
# clients send it only when ApiVersions finalizes `transaction.version` >= 2, which kafkalite
# does not advertise, so every client stays on the 3.8 protocol (COMPATIBILITY.md).
# WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType


@api(26, "EndTxn", (0, 4))
async def handle(ctx, req):
    if not check(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return make(response_class(26, ctx.api_version), throttle_time=ZERO,
                    error_code=E.transactional_id_authorization_failed)
    err = await ctx.broker.transactions.end_txn(req.transactional_id, req.producer_id,
                                                req.producer_epoch, req.committed)
    if err == E.producer_fenced and ctx.api_version < 2:
        err = E.invalid_producer_epoch
    return make(response_class(26, ctx.api_version), throttle_time=ZERO, error_code=err)
