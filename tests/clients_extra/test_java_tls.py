# The Java client over TLS with Kafka's PEM settings (java/ClientsCheck.java): a producer and a
# consumer group over the SSL listener with ssl.truststore.type=PEM, and over the mutual-TLS
# listener with ssl.keystore.type=PEM too, against kafkalite and the real Kafka 3.8 (the
# listeners, certificates and brokers of tests/integration/test_tls.py; Kafka's authorizer
# there admits the client certificate only when Kafka derives certs.CLIENT_DN from it). And
# kafkalite's reading of certificate subjects against Java's own X500Principal.getName(RFC2253)
# (java/TlsCheck.java) for subjects no openssl -subj string can spell. Classpath and skips as test_java_client.py.
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

from kafkalite.security.x509 import pem_certificates, subject_rfc2253
from tests.helpers.certs import keystore, self_signed
from tests.integration.test_tls import brokers, pki  # noqa: F401  (fixtures)

from ._checks import TIMEOUT_S
from .test_java_client import compile_check, java_clients, run_clients_check  # noqa: F401

SOURCE = Path(__file__).parent / "java" / "TlsCheck.java"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def java_tls(tmp_path_factory) -> list[str]:
    return compile_check(SOURCE, tmp_path_factory.mktemp("java-tls"))


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_java_producer_and_consumer_over_tls(brokers, pki, java_clients, mutual):  # noqa: F811
    props = {"bootstrap.servers": brokers.mtls if mutual else brokers.ssl,
             "security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": pki.ca}
    if mutual:
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore(
            pki.dir, "client-keystore.pem", pki.client_key, pki.client_cert)})
    run_clients_check(java_clients, "java-tls-", props,
                      f"Java TLS check against {brokers.kind} "
                      f"({'mutual' if mutual else 'server'} TLS)")


def _attr(oid: ObjectIdentifier, value, kind: _ASN1Type | None = None) -> x509.NameAttribute:
    return x509.NameAttribute(oid, value, kind)


def _name(*rdns: list[x509.NameAttribute]) -> x509.Name:
    return x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns])


SUBJECTS = [
    # Every character Java escapes, in the middle, leading and trailing.
    _name([_attr(NameOID.COUNTRY_NAME, "US")],
          [_attr(NameOID.ORGANIZATION_NAME, 'a,b=c+d<e>f#g;h"i\\j')],
          [_attr(NameOID.COMMON_NAME, "#lead")]),
    _name([_attr(NameOID.COMMON_NAME, "  two spaces each side  ")],
          [_attr(NameOID.ORGANIZATIONAL_UNIT_NAME, " ")],
          [_attr(NameOID.LOCALITY_NAME, "cr\r")], [_attr(NameOID.COMMON_NAME, "nul\0byte")]),
    # RFC 2253 keywords: ST, STREET, DC, UID; a multi-valued RDN.
    _name([_attr(NameOID.DOMAIN_COMPONENT, "com")], [_attr(NameOID.DOMAIN_COMPONENT, "example")],
          [_attr(NameOID.STATE_OR_PROVINCE_NAME, "Bavaria"),
           _attr(NameOID.STREET_ADDRESS, "Main St 1")],
          [_attr(NameOID.USER_ID, "jdoe"), _attr(NameOID.COMMON_NAME, "John Doe")]),
    # Not RFC 2253 keywords for Java: OID=#hex of the DER value.
    _name([_attr(NameOID.SERIAL_NUMBER, "1234")], [_attr(NameOID.TITLE, "Dr")],
          [_attr(NameOID.EMAIL_ADDRESS, "a@b.example")], [_attr(NameOID.SURNAME, "Ünïcode")],
          [_attr(ObjectIdentifier("1.3.6.1.4.1.99999.1"), "private")],
          [_attr(NameOID.X500_UNIQUE_IDENTIFIER, b"\x0f\xf0", _ASN1Type.BitString)]),
    # Other string types: BMPString and PrintableString as text, UniversalString as hex even
    # under a keyword; non-ASCII UTF-8 as it is.
    _name([_attr(NameOID.ORGANIZATION_NAME, "Bmp Ωmega", _ASN1Type.BMPString)],
          [_attr(NameOID.COUNTRY_NAME, "DE", _ASN1Type.PrintableString)],
          [_attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "wide", _ASN1Type.UniversalString)],
          [_attr(NameOID.COMMON_NAME, "Zoë Ådahl 東京")]),
]


def test_subject_dn_is_what_java_x500principal_writes(java_tls, tmp_path):
    pem = self_signed(str(tmp_path / "subjects.pem"), SUBJECTS)
    done = subprocess.run([*java_tls, pem], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    java = [bytes.fromhex(line).decode() for line in done.stdout.split()]
    with open(pem, "rb") as f:
        ours = [subject_rfc2253(c) for c in pem_certificates(f.read())]
    assert len(java) == len(SUBJECTS)
    assert ours == java
