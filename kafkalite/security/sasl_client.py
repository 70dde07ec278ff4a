# The client side of SASL/PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as
# Kafka's PlainSaslClient and ScramSaslClient: what a broker sends when it connects to
# another one on a SASL inter-broker listener (cluster/inter_broker.py). Sans-I/O: each
# client turns the server's last token into the next one to send (b"" starts), and
# `complete` turns true once the server is proven (SCRAM's server signature checked).
# No channel binding (gs2 header "n,,"), no authzid, no extensions: as Kafka's clients.
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from .sasl_errors import SaslAuthenticationFailed
from .sasl_scram import MECHANISM_IDS

CLIENT_MECHANISMS = ("PLAIN", *MECHANISM_IDS)


class PlainClient:
    def __init__(self, username: str, password: str):
        self.username, self.password = username, password
        self.complete = False

    def respond(self, challenge: bytes) -> bytes | None:
        if self.complete:
            return None
        self.complete = True  # PLAIN has one message; the server's answer is empty
        return f"\0{self.username}\0{self.password}".encode()


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None):
        self.mechanism = mechanism
        self.digest = MECHANISM_IDS[mechanism][1]
        self.username, self.password = username, password
        self.nonce = nonce or secrets.token_urlsafe(24)
        self.complete = False
        self._state = "first"
        self._client_first_bare = f"n={_saslname(username)},r={self.nonce}"
        self._server_key = b""
        self._auth_message = b""

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token for the server's `challenge`; None once nothing more is sent."""
        if self._state == "first":
            self._state = "final"
            return ("n,," + self._client_first_bare).encode()
        if self._state == "final":
            self._state = "verify"
            return self._final(challenge.decode("utf-8", "replace"))
        if self._state == "verify":
            self._verify(challenge.decode("utf-8", "replace"))
            self._state = "complete"
            self.complete = True
        return None

    def _final(self, server_first: str) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.split(",") if "=" in a)
        if "e" in attrs:
            raise SaslAuthenticationFailed(f"SCRAM server error: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i")
        if not nonce.startswith(self.nonce) or salt is None or iterations is None:
            raise SaslAuthenticationFailed(f"Invalid SCRAM server first message {server_first!r}")
        salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(),
                                     base64.b64decode(salt), int(iterations))
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        self._auth_message = (f"{self._client_first_bare},{server_first},"
                              f"{without_proof}").encode()
        signature = hmac.new(stored_key, self._auth_message, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_key = hmac.new(salted, b"Server Key", self.digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: str) -> None:
        if server_final.startswith("e="):
            raise SaslAuthenticationFailed(f"SCRAM server error: {server_final[2:]}")
        expected = hmac.new(self._server_key, self._auth_message, self.digest).digest()
        if not hmac.compare_digest(server_final.encode(),
                                   b"v=" + base64.b64encode(expected)):
            raise SaslAuthenticationFailed("Invalid SCRAM server signature")


def client_for(mechanism: str, username: str, password: str) -> PlainClient | ScramClient:
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    return ScramClient(mechanism, username, password)
