# InitProducerId (key 22), v0-5.
#
# Idempotent producers (no transactional id) get a fresh producer id with epoch 0; ids are
# allocated from a persisted counter so none is reused after a restart (the next block of ids
# is persisted ahead, off the event loop). A request carrying an existing id/epoch (v3+,
# KIP-360) also gets a fresh id, which Kafka allows for non-transactional producers. Gap: transactions are not implemented, so a transactional id
# is answered with INVALID_REQUEST (the client reports it and stops).
from __future__ import annotations

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make
from ..registry import api
from ..unsupported import log_refused_feature


@api(22, "InitProducerId", (0, 5))
async def handle(ctx, req):
    cls = response_class(22, ctx.api_version)
    if req.transactional_id is not None:
        log_refused_feature("transactions (exactly-once)",
                            f"InitProducerId with transactional.id {req.transactional_id!r} "
                            f"from {ctx.client_id or ctx.peer}, answered INVALID_REQUEST")
        return make(cls, throttle_time=ZERO, error_code=ErrorCode.invalid_request,
                    producer_id=-1, producer_epoch=-1)
    pid = await ctx.broker.pids.allocate()
    return make(cls, throttle_time=ZERO, error_code=ErrorCode.none, producer_id=pid,
                producer_epoch=0)
