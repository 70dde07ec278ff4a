"""A TLS listener whose keystore is unusable stops `kafkalite serve` at start with one line
on stderr that names the listener, the property and the fault, and exit status 1; the
same line for a listener-specific override (listener.name.<name>.ssl.*)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.real_kafka import free_port_pair
from tests.helpers.certs import keystore, make_pki, sign


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def serve(tmp_path, *sets: str) -> subprocess.CompletedProcess:
    port = free_port_pair()
    cmd = [sys.executable, "-m", "kafkalite", "serve", "--set", f"log.dirs={tmp_path}/data",
           "--set", f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{port + 1}"]
    for s in sets:
        cmd += ["--set", s]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})


def refused(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalite: cannot start: listener SSL: "), \
        out.stderr
    return lines[0]


@pytest.mark.parametrize("name,start,end,fault", [
    ("expired", "20200101000000Z", "20200102000000Z",
     "CN=localhost expired on 2020-01-02 00:00:00 UTC"),
    ("future", "20990101000000Z", "20990102000000Z",
     "CN=localhost is not valid before 2099-01-01 00:00:00 UTC"),
])
def test_certificate_outside_its_validity(pki, tmp_path, name, start, end, fault):
    key, cert = sign(pki.dir, name, "/CN=localhost", server=True, start=start, end=end)
    ks = keystore(pki.dir, f"{name}-keystore.pem", key, cert)
    line = refused(serve(tmp_path, "ssl.keystore.type=PEM", f"ssl.keystore.location={ks}"))
    assert fault in line


def test_key_that_does_not_match_the_certificate(pki, tmp_path):
    ks = keystore(pki.dir, "mismatch.pem", pki.client_key, pki.server_cert)
    line = refused(serve(tmp_path, "ssl.keystore.type=PEM",
                         f"listener.name.ssl.ssl.keystore.location={ks}"))
    assert "the private key does not match the certificate" in line


def test_unreadable_keystore(pki, tmp_path):
    missing = os.path.join(pki.dir, "missing.pem")
    line = refused(serve(tmp_path, "ssl.keystore.type=PEM", f"ssl.keystore.location={missing}"))
    assert f"cannot read ssl.keystore.location {missing}" in line


@pytest.mark.parametrize("content,fault", [
    ("not a certificate\n", "no PEM certificate in it"),
    ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "invalid certificate"),
])
def test_invalid_certificate(pki, tmp_path, content, fault):
    path = tmp_path / "invalid.pem"
    path.write_text(content)
    line = refused(serve(tmp_path, "ssl.keystore.type=PEM", f"ssl.keystore.location={path}"))
    assert fault in line


def test_certificate_without_its_key(pki, tmp_path):
    line = refused(serve(tmp_path, "ssl.keystore.type=PEM",
                         f"ssl.keystore.location={pki.server_cert}"))
    assert "no usable private key and certificate" in line


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_jks_and_pkcs12_keystores_are_refused_with_the_reason(pki, tmp_path, kind):
    line = refused(serve(tmp_path, f"ssl.keystore.type={kind}",
                         f"ssl.keystore.location={pki.server_keystore}"))
    assert f"ssl.keystore.type={kind}: kafkalite reads PEM keystores only" in line


def test_ssl_listener_without_a_keystore(tmp_path):
    line = refused(serve(tmp_path))
    assert "needs ssl.keystore.location" in line


def test_unknown_client_auth_and_protocol(pki, tmp_path):
    base = ("ssl.keystore.type=PEM", f"ssl.keystore.location={pki.server_keystore}")
    assert "ssl.client.auth=sometimes" in refused(serve(tmp_path, *base,
                                                        "ssl.client.auth=sometimes"))
    assert "ssl.enabled.protocols=SSLv3" in refused(serve(tmp_path, *base,
                                                          "ssl.enabled.protocols=SSLv3"))


def test_listener_without_a_security_protocol_exits_2(tmp_path):
    out = serve(tmp_path, "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0")
    assert out.returncode == 2
    assert "No security protocol defined for listener INTERNAL" in out.stderr
