# SaslAuthenticate (key 36), v0-2.
#
# Carries one SASL token of the mechanism chosen by SaslHandshake v1 to the connection's SASL
# session (security/sasl.py: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) and its answer back. A
# failed login is SASL_AUTHENTICATION_FAILED with Kafka's message (mechanism-specific, or
# "Authentication failed during authentication due to invalid credentials with SASL
# mechanism M" where Kafka hides the cause), sent after
# `connection.failed.authentication.delay.ms`, then the connection closes. A success carries empty, not null, auth
# bytes when the mechanism has nothing to say. v1+: session_lifetime_ms, the KIP-368 bound
# (`connections.max.reauth.ms`, or an OAUTHBEARER token's expiry if sooner; 0 = none);
# using v1+ also marks the client as able to re-authenticate. Outside an exchange (a
# PLAINTEXT listener, or after authentication) it is answered as KafkaApis does:
# ILLEGAL_SASL_STATE.
from __future__ import annotations

import datetime

from ...security.sasl import CURRENT
from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make
from ..registry import api


@api(36, "SaslAuthenticate", (0, 2))
async def handle(ctx, req):
    session = CURRENT.get()
    if session is None or session.state not in ("authenticate", "reauth_bad_mechanism") \
            or session.raw_tokens:
        code, message, out, lifetime = (ErrorCode.illegal_sasl_state,
                                        "SaslAuthenticate request received after successful "
                                        "authentication", b"", 0)
    else:
        code, message, out, lifetime = session.authenticate(req.auth_bytes, ctx.api_version)
    return make(response_class(36, ctx.api_version), error_code=code, error_message=message,
                auth_bytes=out, session_lifetime=datetime.timedelta(milliseconds=lifetime)
                if lifetime else ZERO)
