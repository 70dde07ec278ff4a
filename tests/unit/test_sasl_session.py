"""The per-connection SASL state machine (security/sasl.py) on a fake clock: what may be
sent before authentication, failures, KIP-368 session lifetime and re-authentication."""
from __future__ import annotations

import base64
import json
import types

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.security.sasl import SaslSession, SaslSettings, configured_listener, session_for
from kafkalite.security.scram_store import ScramStore
from kafkalite.wire.errors import ErrorCode

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')


class Broker:
    """What a SASL session reads of the broker: config, clock, SCRAM store."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def make(reauth_ms: int = 0, **extra: str) -> tuple[SaslSession, FakeClock]:
    clock = FakeClock()
    config = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
                           "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN,OAUTHBEARER",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                           "connections.max.reauth.ms": str(reauth_ms), **extra})
    broker = Broker(config=config, clock=clock, scram=ScramStore(None))
    return SaslSession(SaslSettings(config, "SASL_PLAINTEXT", broker), clock), clock


def login(s: SaslSession, user: str = "alice", password: str = "alice-secret",
          version: int = 2) -> tuple:
    assert s.before_request(17) is None
    assert s.handshake("PLAIN", 1) == (ErrorCode.none, ["SCRAM-SHA-512", "PLAIN",
                                                        "OAUTHBEARER"])
    assert s.before_request(36) is None
    return s.authenticate(f"\0{user}\0{password}".encode(), version)


def test_mechanisms_listed_in_a_java_hashset_order():
    s, _ = make(**{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"})
    assert s.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]  # as Kafka 3.8 lists


def test_listener_protocol_from_the_map():
    assert configured_listener(BrokerConfig({"listeners": "PLAINTEXT://:1"})) == \
        ("PLAINTEXT", "PLAINTEXT")
    assert configured_listener(BrokerConfig({
        "listeners": "CLIENT://:1", "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT"
    })) == ("CLIENT", "SASL_PLAINTEXT")
    broker = Broker(config=BrokerConfig({"listeners": "PLAINTEXT://:1"}))
    assert session_for(broker, None) is None
    listener = types.SimpleNamespace(name="SECURE", security_protocol="SASL_SSL")
    s, _ = make()
    broker = Broker(config=s.settings.config, clock=FakeClock(), scram=None)
    assert isinstance(session_for(broker, listener), SaslSession)


def test_only_api_versions_and_sasl_before_authentication():
    s, _ = make()
    assert s.before_request(18) is None
    s.after_api_versions()
    assert s.before_request(18) is not None  # one ApiVersions, as Kafka's authenticator
    s, _ = make()
    assert s.before_request(3) == "Unexpected Kafka request of type 3 during SASL handshake."
    assert s.failed
    s, _ = make()
    s.handshake("PLAIN", 1)
    assert s.before_request(0) is not None and s.failed


def test_unknown_mechanism_and_failed_login():
    s, _ = make()
    code, mechanisms = s.handshake("GSSAPI", 1)
    assert code == ErrorCode.unsupported_sasl_mechanism
    assert mechanisms == ["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"] and s.failed
    s, _ = make()
    code, message, out, lifetime = login(s, password="wrong")
    assert (code, message) == (ErrorCode.sasl_authentication_failed,
                               "Authentication failed: Invalid username or password")
    assert s.failed and s.principal is None
    s, _ = make()
    s.handshake("SCRAM-SHA-512", 1)
    code, message, _, _ = s.authenticate(b"n,,n=nobody,r=abc", 2)
    assert message == ("Authentication failed during authentication due to invalid "
                       "credentials with SASL mechanism SCRAM-SHA-512")


def test_success_without_reauth_never_expires():
    s, clock = make()
    assert login(s) == (ErrorCode.none, "", b"", 0)
    assert s.principal == "User:alice" and s.state == "complete"
    clock.advance(10**9)
    assert s.before_request(0) is None
    # a session with no end is not re-authenticated: the handshake goes to the handler
    # (ILLEGAL_SASL_STATE), as Kafka 3.8 answers it (tests/integration/test_acl_matrix.py)
    assert s.before_request(17) is None and s.state == "complete"


def test_session_lifetime_and_reauthentication():
    s, clock = make(reauth_ms=1000)
    assert login(s)[3] == 1000
    clock.advance(900)
    assert s.before_request(17) is None  # re-authentication begins
    assert login(s)[:3] == (ErrorCode.none, "", b"")
    clock.advance(900)  # 1800 ms after the first login, 900 after the second
    assert s.before_request(3) is None
    clock.advance(100)
    assert s.before_request(3) is not None and s.failed  # expired: closed


def test_reauth_needs_a_v1_client_and_the_same_principal_and_mechanism():
    s, _ = make(reauth_ms=1000)
    login(s, version=0)
    assert s.before_request(17) is None and s.state == "complete"  # handler: ILLEGAL_SASL_STATE
    s, _ = make(reauth_ms=1000)
    login(s)
    code, message, _, _ = login(s, "bob", "bob-secret")
    assert code == ErrorCode.sasl_authentication_failed
    assert message == ("Cannot change principals during re-authentication from User.alice: "
                       "User.bob")
    s, _ = make(reauth_ms=1000)
    login(s)
    s.before_request(17)
    assert s.handshake("SCRAM-SHA-512", 1)[0] == ErrorCode.none
    code, message, _, _ = s.authenticate(b"n,,n=alice,r=x", 2)
    assert message == ("SASL mechanism 'SCRAM-SHA-512' requested by client is not supported "
                       "for re-authentication of mechanism 'PLAIN'")


def test_oauthbearer_session_ends_with_the_token():
    s, clock = make(reauth_ms=60_000)
    exp = clock.wall_ms() // 1000 + 30
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode()  # noqa: E731
    token = f"{enc({'alg': 'none'})}.{enc({'sub': 'carol', 'exp': exp})}."
    s.handshake("OAUTHBEARER", 1)
    code, _, _, lifetime = s.authenticate(f"n,,\x01auth=Bearer {token}\x01\x01".encode(), 2)
    assert code == ErrorCode.none and s.principal == "User:carol"
    assert lifetime == exp * 1000 - clock.wall_ms()  # the token ends before the reauth bound
    clock.advance(lifetime)
    assert s.before_request(3) is not None


def test_raw_tokens_after_a_v0_handshake():
    s, _ = make()
    s.handshake("PLAIN", 0)
    assert s.raw_tokens
    assert s.raw_token(b"\0alice\0alice-secret") == b""
    assert s.principal == "User:alice" and not s.raw_tokens
    s, _ = make()
    s.handshake("PLAIN", 0)
    assert s.raw_token(b"\0alice\0nope") is None and s.failed


def test_fuzzed_tokens_only_fail_as_authentication_failures():
    """Random bytes at every step of every mechanism: an answer or a failed login, never
    another exception (which would close the connection as an internal error)."""
    import random
    rng = random.Random(15)
    seeds = [b"\0alice\0alice-secret", b"n,,n=alice,r=abc", b"n,,\x01auth=Bearer a.b.\x01\x01",
             b"c=biws,r=abc,p=AAAA", b""]
    for i in range(600):
        s, _ = make()
        s.handshake(["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"][i % 3], 1)
        for _step in range(3):
            seed = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(0, 6)):
                op = rng.randint(0, 2)
                pos = rng.randint(0, len(seed))
                if op == 0:
                    seed[pos:pos] = bytes([rng.randint(0, 255)])
                elif op == 1 and seed:
                    del seed[min(pos, len(seed) - 1)]
                else:
                    seed[pos:pos] = rng.choice([b",", b"=", b"\x01", b"\0", b"\xff"])
            if s.state != "authenticate":
                break
            code, _, _, _ = s.authenticate(bytes(seed), 2)
            assert code in (ErrorCode.none, ErrorCode.sasl_authentication_failed)


def test_bootstrap_user_settings_from_the_environment():
    from kafkalite.config import env_overrides
    assert env_overrides({"KAFKALITE_SASL_SCRAM_USERS": "bob:pw",
                          "KAFKALITE_SASL_PLAIN_USERS": "alice:pw",
                          "KAFKALITE_SASL_ENABLED_MECHANISMS": "PLAIN"}) == {
        "kafkalite.sasl.scram.users": "bob:pw", "kafkalite.sasl.plain.users": "alice:pw",
        "sasl.enabled.mechanisms": "PLAIN"}
    s, _ = make(**{"kafkalite.sasl.plain.users": "zed:zz"})
    assert login(s, "zed", "zz")[0] == ErrorCode.none
