# ListTransactions (key 66), v0-2.
#
# Every transactional id the coordinator knows (but Dead ones), filtered as Kafka's: by state
# names (unknown names are echoed in unknown_state_filters and match nothing), by producer
# ids, and (v1, KIP-994) by duration: only transactions started more than duration_filter ms
# ago, and (v2, KIP-1152, Kafka 4.1) by a transactional id pattern, a regular expression that
# must match the whole id (null or "" match all; one that does not compile is
# INVALID_REGULAR_EXPRESSION). COORDINATOR_LOAD_IN_PROGRESS while __transaction_state loads.
# Gap: the pattern is Python's `re` dialect where Kafka compiles RE2/J; plain patterns,
# classes and alternation read the same, `\p{..}` classes do not.
from __future__ import annotations

from ...wire.codec import response_class
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType


@api(66, "ListTransactions", (0, 2))
async def handle(ctx, req):
    mod = response_module(66, ctx.api_version)
    err, found, unknown = ctx.broker.transactions.list(
        req.producer_id_filters, req.state_filters, getattr(req, "duration_filter", -1),
        getattr(req, "transactional_id_pattern", None))
    # only the transactional ids the principal may DESCRIBE, as KafkaApis filters them
    hidden = denied(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                    (m.transactional_id for m in found))
    rows = tuple(mod.TransactionState(transactional_id=m.transactional_id,
                                      producer_id=m.producer_id,
                                      transaction_state=m.state.kafka_name)
                 for m in found if m.transactional_id not in hidden)
    return make(response_class(66, ctx.api_version), throttle_time=ZERO,
                error_code=err,
                unknown_state_filters=tuple(unknown), transaction_states=rows)
