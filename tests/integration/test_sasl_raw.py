"""SASL over raw sockets against kafkalite and the real Kafka 3.8 with the same listener
settings: what a client sees before, during and after authentication (issue 15)."""
from __future__ import annotations

import time

import pytest

from tests.helpers.kbatch import is_closed

from .sasl_targets import (LISTED, REAUTH_MS, RawSasl, oauth_token, serves,  # noqa: F401
                           target)


@pytest.fixture
def conn(target):
    c = RawSasl(target.bootstrap)
    yield c
    c.close()
    assert serves(target)  # whatever this test did, the broker goes on serving others


def test_request_before_authentication_closes_unanswered(conn):
    conn.send(3, 1, b"\0\0\0\0")  # Metadata
    assert is_closed(conn.sock)


def test_api_versions_then_handshake_then_login(conn):
    conn.send(18, 0, b"")
    assert conn.answer()[:2] == b"\0\0"
    code, mechanisms = conn.handshake("PLAIN")
    assert (code, mechanisms) == (0, LISTED)  # Kafka's order
    # success: empty (not null) message, empty auth bytes, no session lifetime
    assert conn.authenticate(b"\0alice\0alice-secret") == (0, "", b"", 0)
    assert len(conn.metadata()) > 0


def test_unknown_mechanism(conn):
    assert conn.handshake("GSSAPI") == (33, LISTED)  # UNSUPPORTED_SASL_MECHANISM
    assert is_closed(conn.sock)


def test_wrong_password_answered_then_closed(conn):
    code, message, auth, _ = conn.login_plain(password="wrong")
    assert (code, message, auth) == (58, "Authentication failed: Invalid username or password",
                                      b"")
    assert is_closed(conn.sock)


def test_unknown_scram_user_gets_the_generic_message(conn):
    assert conn.handshake("SCRAM-SHA-256")[0] == 0
    code, message, _, _ = conn.authenticate(b"n,,n=nobody,r=abcdefgh")
    assert (code, message) == (58, "Authentication failed during authentication due to "
                                   "invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert is_closed(conn.sock)


def test_v0_handshake_then_raw_tokens(conn):
    assert conn.handshake("PLAIN", version=0) == (0, LISTED)
    conn.sock.sendall(len(b"\0alice\0alice-secret").to_bytes(4, "big") + b"\0alice\0alice-secret")
    assert conn.sock.recv(4) == b"\0\0\0\0"  # the (empty) server token, size-prefixed
    assert len(conn.metadata()) > 0


def test_sasl_requests_after_authentication(conn):
    conn.login_plain()
    conn.send(36, 1, b"\0\0\0\0")  # SaslAuthenticate: nothing to authenticate any more
    body = conn.answer()
    assert body[:2] == b"\0\x22"  # ILLEGAL_SASL_STATE
    assert b"SaslAuthenticate request received after successful authentication" in body


def test_invalid_unsecured_token(conn):
    assert conn.handshake("OAUTHBEARER")[0] == 0
    assert conn.authenticate(b"n,,\x01auth=Bearer not.a.jwt\x01\x01")[:3] == \
        (0, "", b'{"status":"invalid_token"}')
    assert conn.authenticate(b"\x01")[:2] == (58, '{"status":"invalid_token"}')
    assert is_closed(conn.sock)


def test_reauthentication_extends_the_session_and_expiry_closes(conn):
    assert conn.handshake("OAUTHBEARER")[0] == 0
    code, _, _, lifetime = conn.authenticate(oauth_token("carol"))
    assert code == 0 and 0 < lifetime <= REAUTH_MS
    first_end = time.monotonic() + lifetime / 1000
    time.sleep(lifetime / 2000)
    assert conn.handshake("OAUTHBEARER")[0] == 0  # KIP-368: the same connection
    code, _, _, lifetime = conn.authenticate(oauth_token("carol"))
    second_end = time.monotonic() + lifetime / 1000
    assert code == 0 and lifetime > 0
    time.sleep(max(0.0, first_end - time.monotonic()) + 0.3)
    assert len(conn.metadata()) > 0  # past the first session's end: still served
    time.sleep(max(0.0, second_end - time.monotonic()) + 0.3)
    conn.send(3, 1, b"\0\0\0\0")
    assert is_closed(conn.sock)  # expired and not re-authenticated: closed unanswered


def test_reauthentication_cannot_change_principal(conn):
    assert conn.handshake("OAUTHBEARER")[0] == 0
    assert conn.authenticate(oauth_token("carol"))[0] == 0
    assert conn.handshake("OAUTHBEARER")[0] == 0
    code, message, _, _ = conn.authenticate(oauth_token("dave"))
    assert (code, message) == (58, "Cannot change principals during re-authentication from "
                                   "User.carol: User.dave")
    assert is_closed(conn.sock)


def test_secrets_are_described_as_sensitive_and_never_logged(target):
    """DescribeConfigs on the broker: every JAAS config null and sensitive; a listener's
    per-mechanism override of a non-secret (the OAUTHBEARER re-authentication time) shown
    with its value, as Kafka types it by its base name; no password in any value or log."""
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient(target.confluent("PLAIN"))
    node = list(admin.list_topics(timeout=20).brokers)[0]
    res = ConfigResource(ConfigResource.Type.BROKER, str(node))
    entries = admin.describe_configs([res])[res].result(timeout=30)
    jaas = {k: (e.value, e.is_sensitive) for k, e in entries.items()
            if k.startswith("listener.name.") and k.endswith("sasl.jaas.config")}
    assert set(jaas) == {f"listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config"
                         for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")}
    assert set(jaas.values()) == {(None, True)}
    reauth = entries["listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms"]
    assert (reauth.value, reauth.is_sensitive) == (str(REAUTH_MS), False)
    shown = " ".join(str(e.value) for e in entries.values())
    log = target.proc.read_log()
    for secret in ("admin-secret", "alice-secret"):
        assert secret not in shown and secret not in log
