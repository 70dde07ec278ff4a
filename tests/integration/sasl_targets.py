# A kafkalite and a real Kafka 3.8 with the same SASL_PLAINTEXT listener settings, for the
# SASL tests (test_sasl_*.py), and a small raw SASL client over real sockets.
from __future__ import annotations

import base64
import json
import socket
import struct
import time
from dataclasses import dataclass

import pytest

from kafkalite.testing import BrokerProcess, free_port
from tests.helpers.kbatch import connect, recv_frame
from tests.helpers.real_kafka import RealKafka, free_port_pair, unavailable_reason

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
# What Kafka 3.8's SaslHandshake lists for that setting: a HashSet's order, not the config's
LISTED = ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]
REAUTH_MS = 3000  # OAUTHBEARER sessions only (the listener's per-mechanism override)
_L = "listener.name.sasl_plaintext."
# One text for both brokers: Kafka's property names only.
SASL_SETTINGS = {
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
    _L + "plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";',
    _L + "scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    _L + "scram-sha-512.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    _L + "oauthbearer.sasl.jaas.config":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    _L + "oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
}
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("bob", "bob-secret")}


@dataclass
class Target:
    kind: str
    bootstrap: str  # the SASL_PLAINTEXT listener
    proc: BrokerProcess
    plaintext: str | None = None  # a PLAINTEXT listener (User:ANONYMOUS), where there is one

    def confluent(self, mechanism: str, **over: object) -> dict:
        conf: dict = {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": mechanism}
        if mechanism == "OAUTHBEARER":
            conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                         "sasl.oauthbearer.config": "principal=carol"})
        else:
            conf["sasl.username"], conf["sasl.password"] = USERS[mechanism]
        conf.update(over)
        return conf

    def python_client(self, mechanism: str, password: str | None = None) -> dict:
        """kafka-python's and aiokafka's settings (the same names)."""
        user, secret = USERS[mechanism]
        return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": password or secret}


def start_kafkalite(extra: dict[str, str] | None = None, plaintext: bool = False) -> Target:
    """`extra` settings over SASL_SETTINGS; `plaintext` adds a PLAINTEXT listener, as Kafka's
    serve.sh has one."""
    port = free_port()
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    plain = f"127.0.0.1:{free_port()}" if plaintext else None
    if plain:
        listeners += f",PLAINTEXT://{plain}"
    bp = BrokerProcess(port=port, settings={"listeners": listeners, **SASL_SETTINGS,
                                            **(extra or {})})
    bp.start()
    return Target("kafkalite", bp.bootstrap, bp, plain)


def start_kafka(extra: dict[str, str] | None = None) -> Target | str:
    """A real Kafka with a SASL_PLAINTEXT listener beside serve.sh's PLAINTEXT one (the
    extra properties are appended to server.properties, so they replace its listeners)."""
    reason = unavailable_reason()
    if reason is not None:
        return reason
    port = free_port_pair()
    sasl_port = free_port_pair()
    while sasl_port in (port, port + 1):
        sasl_port = free_port_pair()
    kafka = RealKafka(port=port, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map":
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        **SASL_SETTINGS, **(extra or {})})
    kafka.start()
    return Target("kafka", f"127.0.0.1:{sasl_port}", kafka, f"127.0.0.1:{port}")


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def target(request):
    """The module's tests run against each broker in turn (import this fixture)."""
    t = start_kafkalite() if request.param == "kafkalite" else start_kafka()
    if isinstance(t, str):
        pytest.skip(t)
    try:
        yield t
    finally:
        t.proc.cleanup()


def add_scram_users(target: Target) -> None:
    """bob for both SCRAM mechanisms, through AlterUserScramCredentials on a PLAIN-
    authenticated admin connection; waits (bounded) until bob can log in."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient(target.confluent("PLAIN"))
    ups = [UserScramCredentialUpsertion("bob", ScramCredentialInfo(m, 4096), b"bob-secret")
           for m in (ScramMechanism.SCRAM_SHA_256,)]
    for f in admin.alter_user_scram_credentials(ups).values():
        f.result(timeout=30)
    ups = [UserScramCredentialUpsertion("bob", ScramCredentialInfo(
        ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")]
    for f in admin.alter_user_scram_credentials(ups).values():
        f.result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(can_log_in(target, m) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")):
            return
        time.sleep(0.3)
    raise AssertionError("SCRAM user bob never became usable")


def can_log_in(target: Target, mechanism: str, **over: object) -> bool:
    from confluent_kafka.admin import AdminClient
    try:
        AdminClient(target.confluent(mechanism, **over)).list_topics(timeout=3)
        return True
    except Exception:
        return False


# --- a raw SASL client: request header v1 (non-flexible versions only) ------------------

def _req(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    return struct.pack(">i", len(head) + len(body)) + head + body


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


class RawSasl:
    def __init__(self, bootstrap: str):
        self.sock: socket.socket = connect(bootstrap)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: bytes) -> None:
        self.corr += 1
        self.sock.sendall(_req(api_key, version, self.corr, body))

    def answer(self) -> bytes:
        frame = recv_frame(self.sock)
        assert struct.unpack(">i", frame[:4])[0] == self.corr
        return frame[4:]

    def handshake(self, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
        self.send(17, version, _str(mechanism))
        body = self.answer()
        code, n = struct.unpack(">hi", body[:6])
        pos, mechs = 6, []
        for _ in range(n):
            (ln,) = struct.unpack(">h", body[pos:pos + 2])
            mechs.append(body[pos + 2:pos + 2 + ln].decode())
            pos += 2 + ln
        return code, mechs

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes, int]:
        """SaslAuthenticate v1: (error code, message, auth bytes, session lifetime ms)."""
        self.send(36, 1, struct.pack(">i", len(token)) + token)
        body = self.answer()
        code, mlen = struct.unpack(">hh", body[:4])
        pos = 4
        message = None
        if mlen >= 0:
            message, pos = body[4:4 + mlen].decode(), 4 + mlen
        (blen,) = struct.unpack(">i", body[pos:pos + 4])
        auth = body[pos + 4:pos + 4 + blen]
        (lifetime,) = struct.unpack(">q", body[pos + 4 + blen:pos + 12 + blen])
        return code, message, auth, lifetime

    def metadata(self) -> bytes:
        self.send(3, 1, struct.pack(">i", 0))  # Metadata v1, no topics
        return self.answer()

    def login_plain(self, user: str = "alice", password: str = "alice-secret"
                    ) -> tuple[int, str | None, bytes, int]:
        assert self.handshake("PLAIN")[0] == 0
        return self.authenticate(f"\0{user}\0{password}".encode())


def unsecured_jwt(sub: str, lifetime_s: int = 3600) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa
    now = int(time.time())
    return f"{enc({'alg': 'none'})}.{enc({'sub': sub, 'iat': now, 'exp': now + lifetime_s})}."


def oauth_token(sub: str) -> bytes:
    return f"n,,\x01auth=Bearer {unsecured_jwt(sub)}\x01\x01".encode()


def serves(target: Target) -> bool:
    """A fresh connection logs in with PLAIN and gets a Metadata answer."""
    c = RawSasl(target.bootstrap)
    try:
        return c.login_plain()[0] == 0 and len(c.metadata()) > 0
    finally:
        c.close()
