# SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) server side against the salted
# credentials of scram_store.py, as Kafka's ScramSaslServer: client-first "n,[a=authzid],n=
# user,r=nonce[,ext]" (no channel binding: the gs2 flag must be "n"), server-first with the
# credential's salt and iteration count, client-final verified through StoredKey, and the
# server signature from ServerKey. Delegation tokens are not served: the `tokenauth`
# extension is refused as an unknown token. Sans-I/O; the nonce source is injectable.
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from typing import Callable

from .sasl_errors import SaslAuthenticationFailed, SaslInvalid
from .scram_store import (MIN_ITERATIONS, ScramCredential, ScramStore, make_credential,
                           salted_password)

MECHANISM_IDS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}

_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # any printable but ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_EXT = r"[\x21-\x2b\x2d-\x3c\x3e-\x7e]+=[\x21-\x2b\x2d-\x7e]+"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>n=(?P<name>{_SASLNAME}),"
    rf"r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?P<ext>(?:,{_EXT})*))", re.S)
_CLIENT_FINAL = re.compile(
    rf"(?P<without>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    rf"(?:,{_EXT})*),p=(?P<proof>[A-Za-z0-9+/=]+)", re.S)


def _username(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _random_nonce() -> str:
    return secrets.token_urlsafe(24)


class ScramServer:
    def __init__(self, mechanism: str, lookup: Callable[[str, int], ScramCredential | None],
                 nonce: Callable[[], str] = _random_nonce):
        self.mechanism = mechanism
        self.mech_id, self.digest = MECHANISM_IDS[mechanism]
        self.lookup = lookup
        self.nonce = nonce
        self.complete = False
        self.principal_name: str | None = None
        self.credential_expiry_ms: int | None = None
        self._state = "first"
        self._cred: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslInvalid("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise SaslInvalid(f"Unexpected challenge in Sasl server state {self._state}")

    def _first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslInvalid(f"Invalid SCRAM client first message format: {text!r}")
        exts = dict(e.split("=", 1) for e in m["ext"].split(",")[1:])
        if exts.get("tokenauth", "").lower() == "true":
            raise SaslInvalid("Token Authentication failed: delegation tokens are not served")
        username = _username(m["name"])
        cred = self.lookup(username, self.mech_id)
        if cred is None:
            raise SaslInvalid("Authentication failed: Invalid user credentials")
        if m["authzid"] and _username(m["authzid"]) != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        if cred.iterations < MIN_ITERATIONS:
            raise SaslInvalid(f"Iterations {cred.iterations} is less than the minimum "
                              f"{MIN_ITERATIONS} for {self.mechanism}")
        self._cred = cred
        self._gs2 = text[:m.start("bare")]
        self._client_first_bare = m["bare"]
        self._nonce = m["nonce"] + self.nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        self.principal_name = username
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslInvalid("Invalid SCRAM client final message format")
        if m["nonce"] != self._nonce:
            raise SaslInvalid("Invalid client nonce in the final client message.")
        if m["channel"] != base64.b64encode(self._gs2.encode()).decode():
            raise SaslInvalid("Invalid channel binding in the final client message.")
        cred = self._cred
        assert cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without']}".encode()
        try:
            proof = base64.b64decode(m["proof"], validate=True)
        except ValueError:
            raise SaslInvalid("Invalid client proof encoding") from None
        signature = hmac.new(cred.stored_key, auth_message, self.digest).digest()
        if len(proof) != len(signature):
            raise SaslInvalid("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(),
                                   cred.stored_key):
            raise SaslInvalid("Invalid client credentials")
        server_signature = hmac.new(cred.server_key, auth_message, self.digest).digest()
        self._cred = None  # Kafka's clearCredentials: nothing secret outlives the exchange
        self._state = "complete"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def bootstrap_scram_users(store: ScramStore, spec: str | None) -> None:
    """kafkalite.sasl.scram.users (`name:password,...`): give each user both SCRAM
    mechanisms with that password, keeping a stored credential that already matches it."""
    for item in (spec or "").split(","):
        user, sep, password = item.strip().partition(":")
        if not (sep and user):
            continue
        for mech, _ in MECHANISM_IDS.values():
            old = store.get(user, mech)
            if old is not None and make_credential(mech, old.salt, salted_password(
                    mech, password, old.salt, old.iterations), old.iterations) == old:
                continue
            salt = secrets.token_bytes(32)
            # one alter per mechanism: a user twice in one request is DUPLICATE_RESOURCE
            store.alter([], [(user, mech, MIN_ITERATIONS, salt,
                              salted_password(mech, password, salt, MIN_ITERATIONS))])
