"""PLAIN and unsecured OAUTHBEARER server sides, and the JAAS/user parsing they rely on."""
from __future__ import annotations

import base64
import json

import pytest

from kafkalite.clock import FakeClock
from kafkalite.security.sasl import parse_jaas, parse_users
from kafkalite.security.sasl_errors import SaslAuthenticationFailed, SaslInvalid
from kafkalite.security.sasl_oauthbearer import OAuthBearerServer
from kafkalite.security.sasl_plain import PlainServer

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="al\\"ice";')


def test_jaas_options_and_bootstrap_users():
    opts = parse_jaas(JAAS)
    assert opts == {"username": "admin", "password": "admin-secret",
                    "user_admin": "admin-secret", "user_alice": 'al"ice'}
    assert parse_jaas("M required unsecuredValidatorRequiredScope=read;") == {
        "unsecuredValidatorRequiredScope": "read"}
    assert parse_users("a:x, b:y:z,bad") == {"a": "x", "b": "y:z"}


@pytest.mark.parametrize("token,message", [
    (b"\0alice\0secret", None),
    (b"alice\0alice\0secret", None),
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0secret", "Authentication failed: Invalid username or password"),
    (b"\0\0secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice\0secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"bob\0alice\0secret", "Authentication failed: Client requested an authorization id "
                            "that is different from username"),
])
def test_plain(token, message):
    s = PlainServer({"alice": "secret"})
    if message is None:
        assert s.evaluate(token) == b""
        assert s.complete and s.principal_name == "alice"
    else:
        with pytest.raises(SaslAuthenticationFailed) as e:
            s.evaluate(token)
        assert str(e.value) == message and not s.complete


def jwt(claims: dict, alg: str = "none") -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa
    return f"{enc({'alg': alg})}.{enc(claims)}."


def first(token: str, authzid: str = "", ext: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


def test_oauthbearer_valid_token_and_expiry_on_the_clock():
    clock = FakeClock()
    now_s = clock.wall_ms() // 1000
    s = OAuthBearerServer(clock.wall_ms, {})
    assert s.evaluate(first(jwt({"sub": "carol", "exp": now_s + 60, "iat": now_s}),
                            ext="traceId=1\x01")) == b""
    assert s.complete and s.principal_name == "carol"
    assert s.credential_expiry_ms == (now_s + 60) * 1000
    # the same token after its expiry: Kafka's JSON error challenge, then the failure
    clock.advance(61_000)
    late = OAuthBearerServer(clock.wall_ms, {})
    assert late.evaluate(first(jwt({"sub": "carol", "exp": now_s + 60}))) == \
        b'{"status":"invalid_token"}'
    assert not late.complete
    with pytest.raises(SaslAuthenticationFailed, match='invalid_token'):
        late.evaluate(b"\x01")


@pytest.mark.parametrize("token", [
    jwt({"sub": "carol", "exp": 4e9}, alg="HS256"),  # signed tokens are not unsecured ones
    jwt({"exp": 4e9}),  # no principal
    jwt({"sub": "carol"}),  # no expiry
    jwt({"sub": "carol", "exp": 4e9, "iat": 4e9}),  # issued in the future
    "not-a-jwt",
    jwt({"sub": "carol", "exp": 4e9}) + "signature",
])
def test_oauthbearer_invalid_tokens(token):
    s = OAuthBearerServer(FakeClock().wall_ms, {})
    assert s.evaluate(first(token)) == b'{"status":"invalid_token"}'
    assert not s.complete


def test_oauthbearer_scope_authzid_and_format():
    clock = FakeClock()
    opts = {"unsecuredValidatorRequiredScope": "write"}
    s = OAuthBearerServer(clock.wall_ms, opts)
    assert s.evaluate(first(jwt({"sub": "c", "exp": 4e9, "scope": "read"}))) == \
        b'{"status":"insufficient_scope", "scope":"write"}'
    s = OAuthBearerServer(clock.wall_ms, opts)
    s.evaluate(first(jwt({"sub": "c", "exp": 4e9, "scope": ["read", "write"]})))
    assert s.complete
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        OAuthBearerServer(clock.wall_ms, {}).evaluate(
            first(jwt({"sub": "c", "exp": 4e9}), authzid="d"))
    with pytest.raises(SaslInvalid):
        OAuthBearerServer(clock.wall_ms, {}).evaluate(b"n,,auth=Bearer x")
