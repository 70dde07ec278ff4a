# SaslHandshake (key 17), v0-1.
#
# On a SASL_PLAINTEXT or SASL_SSL listener the connection's SASL session (security/sasl.py)
# answers it: the enabled mechanisms (`sasl.enabled.mechanisms`, in the order Kafka's HashSet
# gives them) with NONE when the client's mechanism is one of them, else
# UNSUPPORTED_SASL_MECHANISM, sent after `connection.failed.authentication.delay.ms`, then
# the connection closes. v0: the SASL tokens
# that follow come as raw size-prefixed frames (no SaslAuthenticate); v1: in SaslAuthenticate
# requests. After authentication, a SaslHandshake from a client that used SaslAuthenticate
# v1+ starts KIP-368 re-authentication. Elsewhere (a PLAINTEXT listener, or a client that
# cannot re-authenticate) it is answered as KafkaApis does: ILLEGAL_SASL_STATE, no
# mechanisms. Gap: GSSAPI (Kafka's default `sasl.enabled.mechanisms`) is listed when
# enabled but refused with UNSUPPORTED_SASL_MECHANISM: kafkalite has no Kerberos.
from __future__ import annotations

from ...security.sasl import CURRENT
from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import make
from ..registry import api


@api(17, "SaslHandshake", (0, 1))
async def handle(ctx, req):
    session = CURRENT.get()
    if session is None or session.state not in ("handshake_or_versions", "handshake"):
        code, mechanisms = ErrorCode.illegal_sasl_state, []
    else:
        code, mechanisms = session.handshake(req.mechanism, ctx.api_version)
    return make(response_class(17, ctx.api_version), error_code=code,
                mechanisms=tuple(mechanisms))
