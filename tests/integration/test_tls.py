"""TLS listeners, checked through the unmodified clients against kafkalite and against
Apache Kafka 3.8 configured with the same properties: three named listeners (PLAINTEXT,
SSL with ssl.client.auth=requested, MTLS with listener.name.mtls.ssl.client.auth=required),
PEM keystore and truststore made in the test by tests/helpers/certs.py."""
from __future__ import annotations

import os
import socket
import ssl
import time
import uuid
from dataclasses import dataclass

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.certs import CLIENT_DN, make_pki, sign
from tests.helpers.kbatch import call, recv_frame, request_bytes
from tests.helpers.kclients import consume, produce
from tests.helpers.real_kafka import RealKafka, free_port_pair, unavailable_reason

pytestmark = pytest.mark.timeout(300)


@dataclass
class Endpoints:
    plain: str
    ssl: str
    mtls: str
    kind: str


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(str(tmp_path_factory.mktemp("pki")))
    # A client the Kafka authorizer below does not know: its principal is not a super user.
    pki.stranger_key, pki.stranger_cert = sign(pki.dir, "stranger", "/CN=stranger")
    return pki


def tls_settings(pki, plain: int, tls: int, extra_map: str = "") -> dict[str, str]:
    listeners = (f"PLAINTEXT://127.0.0.1:{plain}{extra_map and ',CONTROLLER://127.0.0.1:'}"
                 f"{plain + 1 if extra_map else ''},SSL://127.0.0.1:{tls},"
                 f"MTLS://127.0.0.1:{tls + 1}")
    return {
        "listeners": listeners,
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},"
                                f"MTLS://127.0.0.1:{tls + 1}",
        "listener.security.protocol.map": f"{extra_map}PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "ssl.client.auth": "requested", "listener.name.mtls.ssl.client.auth": "required",
        "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    }


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def brokers(request, pki, tmp_path_factory):
    plain, tls = free_port_pair(), free_port_pair()
    if request.param == "kafkalite":
        proc = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("kl") / "data"), port=plain,
                             settings=tls_settings(pki, plain, tls))
    else:
        if unavailable_reason():
            pytest.skip(unavailable_reason())
        settings = tls_settings(pki, plain, tls, extra_map="CONTROLLER:PLAINTEXT,")
        # The authorizer only proves which principal Kafka derives from a certificate
        # (test_principal_is_the_rfc2253_subject): everyone else is a super user.
        settings.update({
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # A .properties file reads a backslash as an escape: the DN's "\," needs two.
            "super.users": f"User:ANONYMOUS;User:{CLIENT_DN}".replace("\\", "\\\\")})
        proc = RealKafka(port=plain, settings=settings)
    try:
        proc.start()
        yield Endpoints(f"127.0.0.1:{plain}", f"127.0.0.1:{tls}", f"127.0.0.1:{tls + 1}",
                        request.param)
    finally:
        proc.cleanup()


def confluent_tls(pki, cert: bool = False) -> dict:
    conf = {"security.protocol": "SSL", "ssl.ca.location": pki.ca}
    if cert:
        conf.update({"ssl.certificate.location": pki.client_cert,
                     "ssl.key.location": pki.client_key})
    return conf


def client_context(pki, cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki.ca)
    if cert:
        ctx.load_cert_chain(pki.client_cert, pki.client_key)
    return ctx


def tls_extra(client: str, pki, cert: bool = False) -> dict:
    if client == "confluent":
        return confluent_tls(pki, cert)
    return {"security_protocol": "SSL", "ssl_context": client_context(pki, cert)}


def api_versions_frame() -> bytes:
    from kafka.protocol.metadata import ApiVersionsRequest
    return request_bytes(ApiVersionsRequest[0](), 7)


def assert_serving(b: Endpoints, pki) -> None:
    """The broker still answers, over its TLS listener."""
    topic = f"alive-{uuid.uuid4().hex[:8]}"
    produce("confluent", b.ssl, topic, [(0, None, b"still", None, None)],
            **confluent_tls(pki))


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_clients_produce_and_consume_over_tls(brokers, pki, client):
    topic = f"tls-{client}-{uuid.uuid4().hex[:8]}"
    values = [f"v{i}".encode() for i in range(5)]
    extra = tls_extra(client, pki)
    produce(client, brokers.ssl, topic, [(0, None, v, None, None) for v in values], **extra)
    got = consume(client, brokers.ssl, topic, {0: 5}, timeout=30, **extra)
    assert [r[3] for r in got[0]] == values


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_mutual_tls_with_a_client_certificate(brokers, pki, client):
    topic = f"mtls-{client}-{uuid.uuid4().hex[:8]}"
    extra = tls_extra(client, pki, cert=True)
    produce(client, brokers.mtls, topic, [(0, b"k", b"signed", None, None)], **extra)
    got = consume(client, brokers.mtls, topic, {0: 1}, timeout=30, **extra)
    assert [r[3] for r in got[0]] == [b"signed"]


def test_consumer_group_over_tls_finds_its_coordinator_on_the_tls_listener(brokers, pki):
    """FindCoordinator answers the SSL endpoint: a coordinator on the PLAINTEXT port
    would leave this TLS consumer unable to join."""
    import confluent_kafka as ck
    topic = f"tls-group-{uuid.uuid4().hex[:8]}"
    produce("confluent", brokers.ssl, topic, [(0, None, b"g1", None, None)],
            **confluent_tls(pki))
    c = ck.Consumer({"bootstrap.servers": brokers.ssl, "group.id": f"g-{topic}",
                     "auto.offset.reset": "earliest", **confluent_tls(pki)})
    try:
        c.subscribe([topic])
        deadline, got = time.monotonic() + 60, []
        while not got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"g1"]
        c.commit(asynchronous=False)
        committed = c.committed([ck.TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 1
    finally:
        c.close()


def test_each_listener_advertises_its_own_endpoint(brokers, pki):
    from confluent_kafka.admin import AdminClient
    for bootstrap, conf in ((brokers.plain, {}), (brokers.ssl, confluent_tls(pki)),
                            (brokers.mtls, confluent_tls(pki, cert=True))):
        admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
        md = admin.list_topics(timeout=20)
        assert [(b.host, b.port) for b in md.brokers.values()] == \
            [("127.0.0.1", int(bootstrap.rsplit(":", 1)[1]))]
    # DescribeCluster itself (librdkafka's describe_cluster sends Metadata), raw.
    from kafka.protocol.admin import DescribeClusterRequest
    for bootstrap, ctx in ((brokers.plain, None), (brokers.ssl, client_context(pki)),
                           (brokers.mtls, client_context(pki, cert=True))):
        host, port = bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            s = ctx.wrap_socket(raw, server_hostname="localhost") if ctx else raw
            s.settimeout(10)
            answer = call(s, DescribeClusterRequest[0](include_cluster_authorized_operations=False))
        assert answer.error_code == 0
        assert [(b.host, b.port) for b in answer.brokers] == [("127.0.0.1", int(port))]


def _read_until_closed(sock: socket.socket, limit_s: float = 10.0) -> bytes:
    sock.settimeout(limit_s)
    data = b""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not chunk:
            break
        data += chunk
    return data


def test_plaintext_bytes_on_the_tls_port_get_an_alert_and_a_close(brokers, pki):
    host, port = brokers.ssl.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(api_versions_frame())
        answer = _read_until_closed(s)
    # Nothing but TLS records: an alert (content type 21) or nothing before the close.
    assert answer == b"" or answer[0] == 21, answer[:16]
    assert_serving(brokers, pki)


def test_tls_on_the_plaintext_port_is_dropped(brokers, pki):
    host, port = brokers.plain.rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=10)
    ctx = client_context(pki)
    with pytest.raises((ssl.SSLError, OSError)):
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(api_versions_frame())
            s.recv(4)
    raw.close()
    assert_serving(brokers, pki)


def _tls_api_versions(bootstrap: str, ctx: ssl.SSLContext) -> int:
    """The ApiVersions error code over TLS; raises when the broker closes instead."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.settimeout(10)
            s.sendall(api_versions_frame())
            frame = recv_frame(s)
            return int.from_bytes(frame[4:6], "big")


def test_required_client_auth_refuses_a_client_without_a_certificate(brokers, pki):
    with pytest.raises((ssl.SSLError, OSError, AssertionError)):
        _tls_api_versions(brokers.mtls, client_context(pki))
    # The same listener with a certificate, and the SSL listener (requested) without one.
    assert _tls_api_versions(brokers.mtls, client_context(pki, cert=True)) == 0
    assert _tls_api_versions(brokers.ssl, client_context(pki)) == 0


def test_a_certificate_from_another_ca_is_refused(brokers, pki):
    ctx = client_context(pki)
    other_key, other_cert = sign(os.path.dirname(pki.other_ca), "foreign", "/CN=foreign")
    ctx.load_cert_chain(other_cert, other_key)
    with pytest.raises((ssl.SSLError, OSError, AssertionError)):
        _tls_api_versions(brokers.mtls, ctx)
    assert_serving(brokers, pki)


def test_kafka_derives_the_principal_that_certs_CLIENT_DN_states(brokers, pki):
    """CLIENT_DN is Kafka's principal for the client certificate: Kafka's authorizer lets
    it (a super user) create a topic and refuses a certificate with another subject. The
    kafkalite test below expects the same string on its connection."""
    if brokers.kind != "kafka":
        pytest.skip("the reference run: kafkalite's side is the in-process test below")
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    def create(conf: dict) -> None:
        admin = AdminClient({"bootstrap.servers": brokers.mtls, **confluent_tls(pki), **conf})
        name = f"principal-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, 1, 1)], request_timeout=20)[name].result(30)
    create({"ssl.certificate.location": pki.client_cert, "ssl.key.location": pki.client_key})
    with pytest.raises(KafkaException) as refused:
        create({"ssl.certificate.location": pki.stranger_cert,
                "ssl.key.location": pki.stranger_key})
    assert "AUTHORIZATION_FAILED" in refused.value.args[0].name()


async def test_kafkalite_connection_principal_is_the_rfc2253_subject(pki, tmp_path):
    import asyncio

    from kafkalite.config import load_config
    from kafkalite.server import KafkaServer
    cfg = load_config(sets=[f"log.dirs={tmp_path / 'data'}", "listeners=SSL://127.0.0.1:0",
                            "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.server_keystore}",
                            "ssl.truststore.type=PEM", f"ssl.truststore.location={pki.ca}",
                            "ssl.client.auth=requested"], environ={})
    server = KafkaServer(cfg)
    await server.start()
    try:
        principals = []
        for ctx in (client_context(pki, cert=True), client_context(pki)):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", server.listeners[0].port, ssl=ctx, server_hostname="localhost")
            writer.write(api_versions_frame())
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
            await reader.readexactly(size)
            principals.append(sorted(c.principal for c in server.connections))
            writer.close()
        assert principals[0] == [f"User:{CLIENT_DN}"]
        assert sorted(principals[1]) in (["User:ANONYMOUS"],
                                         ["User:ANONYMOUS", f"User:{CLIENT_DN}"])
        assert {c.listener.name for c in server.connections} == {"SSL"}
    finally:
        await server.stop()
