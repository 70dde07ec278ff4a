# What kafkalite reads from an X.509 certificate, through the `cryptography` package (the
# standard library's ssl module verifies certificates but exposes neither exactly):
# - the subject as Java's X500Principal.getName(RFC2253) writes it, which Kafka's
#   DefaultKafkaPrincipalBuilder makes the principal of a TLS client (`User:CN=...,O=...`):
#   most specific RDN first, RFC 2253's keywords (CN, C, L, ST, O, OU, STREET, DC, UID: the
#   names `cryptography` gives these OIDs too), any other attribute as its dotted OID and
#   '#' + the hex of its DER value, a string's content octets read as UTF-8 whatever its
#   type (as JDK 17 does), and Java's escaping (not RFC 4514's, which cryptography's
#   rfc4514_string() writes);
# - the validity period, to refuse an expired keystore at start.
from __future__ import annotations

from cryptography import x509
from cryptography.x509.name import _ASN1Type

# NameAttribute._type is the ASN.1 string type read from the certificate: cryptography keeps
# it under that private name only, and Java's output depends on it.

# Java writes a keyword's value as text only for these ASN.1 string types (AVA.isDerString);
# any other value (a UniversalString, a BIT STRING) becomes '#' + hex, keyword or not.
_TEXT_TYPES = {_ASN1Type.PrintableString, _ASN1Type.T61String, _ASN1Type.IA5String,
               _ASN1Type.BMPString, _ASN1Type.UTF8String}
_ESCAPED = ',=+<>#;"\\'
_ENCODINGS = {_ASN1Type.BMPString: "utf-16-be", _ASN1Type.UniversalString: "utf-32-be"}


class CertificateError(ValueError):
    pass


def _content(attr: x509.NameAttribute) -> bytes:
    """The attribute value's DER content octets, as `cryptography` encodes them."""
    if isinstance(attr.value, bytes):  # a BIT STRING's content as it is
        return attr.value
    return attr.value.encode(_ENCODINGS.get(attr._type, "utf-8"))


def _der_value(attr: x509.NameAttribute) -> bytes:
    content = _content(attr)
    n = len(content)
    size = (n.bit_length() + 7) // 8
    length = bytes([n]) if n < 0x80 else bytes([0x80 | size]) + n.to_bytes(size, "big")
    return bytes([attr._type.value]) + length + content


def _escape(value: str) -> str:
    """Java's AVA.toRFC2253String escaping: the special characters anywhere, NUL as \\00,
    then every leading and trailing space or CR."""
    text = "".join("\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in value)
    body = text.lstrip(" \r")
    core = body.rstrip(" \r")
    lead, trail = text[:len(text) - len(body)], body[len(core):]
    return "".join("\\" + c for c in lead) + core + "".join("\\" + c for c in trail)


def _ava(attr: x509.NameAttribute) -> str:
    keyword = attr.rfc4514_attribute_name
    if keyword == attr.oid.dotted_string or attr._type not in _TEXT_TYPES:
        return f"{keyword}=#{_der_value(attr).hex()}"
    # Java reads the content octets as UTF-8 whatever the string type (a BMPString too).
    return f"{keyword}={_escape(_content(attr).decode('utf-8', 'replace'))}"


def subject_rfc2253(cert: x509.Certificate) -> str:
    """The certificate's subject DN as Java's X500Principal.getName("RFC2253")."""
    try:
        rdns = cert.subject.rdns
        return ",".join("+".join(_ava(a) for a in rdn) for rdn in reversed(rdns))
    except ValueError as e:
        raise CertificateError(f"unreadable subject: {e}") from None


def validity(cert: x509.Certificate) -> tuple[int, int]:
    """(notBefore, notAfter) in seconds since the epoch."""
    return (int(cert.not_valid_before_utc.timestamp()),
            int(cert.not_valid_after_utc.timestamp()))


def der_certificate(der: bytes) -> x509.Certificate:
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError as e:
        raise CertificateError(str(e)) from None


def pem_certificates(pem: bytes) -> list[x509.Certificate]:
    """Every CERTIFICATE block in a PEM text, in order; none when there is none."""
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        return []
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError as e:
        raise CertificateError(str(e)) from None
