"""SCRAM server side (RFC 5802/7677) against stored credentials, with RFC 7677's example."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kafkalite.security.sasl_errors import SaslAuthenticationFailed, SaslInvalid
from kafkalite.security.sasl_scram import ScramServer, bootstrap_scram_users
from kafkalite.security.scram_store import ScramStore, make_credential, salted_password

# RFC 7677 section 3: user "user", password "pencil"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def store_with(user: str, password: str, mech: int = 1, iterations: int = 4096,
               salt: bytes = SALT) -> dict:
    return {(user, mech): make_credential(mech, salt, salted_password(mech, password, salt,
                                                                     iterations), iterations)}


def server(creds: dict, mechanism: str = "SCRAM-SHA-256",
           nonce: str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0") -> ScramServer:
    return ScramServer(mechanism, lambda u, m: creds.get((u, m)), nonce=lambda: nonce)


def test_rfc7677_example_exchange():
    s = server(store_with("user", "pencil"))
    assert s.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert not s.complete
    assert s.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert s.complete and s.principal_name == "user"


def test_wrong_proof_unknown_user_and_bad_nonce_fail_without_detail():
    s = server(store_with("user", "other"))
    s.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslInvalid):
        s.evaluate(CLIENT_FINAL)
    with pytest.raises(SaslInvalid):
        server({}).evaluate(CLIENT_FIRST)
    s = server(store_with("user", "pencil"), nonce="different")
    s.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslInvalid, match="nonce"):
        s.evaluate(CLIENT_FINAL)


def test_channel_binding_and_tokenauth_refused():
    with pytest.raises(SaslInvalid):  # gs2 "p=": channel binding, which Kafka refuses too
        server(store_with("user", "pencil")).evaluate(b"p=tls-unique,,n=user,r=abc")
    with pytest.raises(SaslInvalid, match="Token"):
        server(store_with("user", "pencil")).evaluate(b"n,,n=user,r=abc,tokenauth=true")


def test_authzid_must_name_the_user():
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        server(store_with("user", "pencil")).evaluate(b"n,a=admin,n=user,r=abc")


def _client(mech: str, digest: str, user: str, password: str, s: ScramServer) -> bytes:
    """A plain RFC 5802 client, independent of the server's code paths."""
    first_bare = f"n={user},r=clientnonce"
    server_first = s.evaluate(f"n,,{first_bare}".encode()).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    without = f"c=biws,r={attrs['r']}"
    auth = f"{first_bare},{server_first},{without}".encode()
    sig = hmac.new(hashlib.new(digest, client_key).digest(), auth, digest).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    final = s.evaluate(f"{without},p={proof}".encode())
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    assert final == b"v=" + base64.b64encode(hmac.new(server_key, auth, digest).digest())
    return final


def test_bootstrap_users_get_both_mechanisms_and_keep_matching_credentials(tmp_path):
    store = ScramStore(str(tmp_path))
    bootstrap_scram_users(store, "bob:bob-secret, eve:x")
    for mech, (name, digest) in ((1, ("SCRAM-SHA-256", "sha256")),
                                 (2, ("SCRAM-SHA-512", "sha512"))):
        s = ScramServer(name, store.get)
        _client(name, digest, "bob", "bob-secret", s)
        assert s.complete and s.principal_name == "bob"
    before = store.get("bob", 1)
    bootstrap_scram_users(store, "bob:bob-secret")
    assert store.get("bob", 1) is before  # same password: not rewritten
    bootstrap_scram_users(store, "bob:new")
    assert store.get("bob", 1) != before
