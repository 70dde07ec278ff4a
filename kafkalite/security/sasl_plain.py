# SASL/PLAIN (RFC 4616) server side, as Kafka's PlainSaslServer with its default
# PlainServerCallbackHandler: the users are the `user_<name>="<password>"` options of the
# listener's PlainLoginModule JAAS config (plus kafkalite's bootstrap users). Sans-I/O.
from __future__ import annotations

import hmac
from typing import Mapping

from .sasl_errors import SaslAuthenticationFailed


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]):
        self.users = users
        self.complete = False
        self.principal_name: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        # message = [authzid] UTF8NUL authcid UTF8NUL passwd
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare_digest: a wrong password takes as long whatever its common prefix
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        self.principal_name = username
        self.complete = True
        return b""
