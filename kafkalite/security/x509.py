# The two things kafkalite reads from an X.509 certificate, with a minimal DER reader (the
# standard library's ssl module verifies certificates but exposes neither exactly):
# - the subject as Java's X500Principal.getName(RFC2253) writes it, which Kafka's
#   DefaultKafkaPrincipalBuilder makes the principal of a TLS client (`User:CN=...,O=...`):
#   most specific RDN first, RFC 2253's keywords (CN, C, L, ST, O, OU, STREET, DC, UID),
#   any other attribute as its dotted OID and '#' + the hex of its DER value;
# - the validity period, to refuse an expired keystore at start.
from __future__ import annotations

import base64
import calendar
import re

KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
            "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
            "0.9.2342.19200300.100.1.1": "UID"}
_STRINGS = {0x0C: "utf-8", 0x13: "latin-1", 0x16: "latin-1", 0x14: "latin-1",
            0x1E: "utf-16-be", 0x1C: "utf-32-be"}
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)


class CertificateError(ValueError):
    pass


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of value, end of value) of the DER element at pos."""
    if pos + 2 > len(data):
        raise CertificateError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    if pos + length > len(data):
        raise CertificateError("truncated DER")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, value start, value end, element start) of each element in [start, end)."""
    out = []
    while start < end:
        tag, vs, ve = _tlv(data, start)
        out.append((tag, vs, ve, start))
        start = ve
    return out


def _oid(raw: bytes) -> str:
    parts = [raw[0] // 40, raw[0] % 40]
    value = 0
    for b in raw[1:]:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _tbs_fields(der: bytes) -> list[tuple[int, int, int, int]]:
    _, cs, ce = _tlv(der, 0)
    _, ts, te = _tlv(der, cs)
    fields = _children(der, ts, te)
    if fields and fields[0][0] == 0xA0:  # explicit [0] version
        fields = fields[1:]
    if len(fields) < 5:
        raise CertificateError("not an X.509 certificate")
    return fields  # serial, signature algorithm, issuer, validity, subject, ...


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_rfc2253(der: bytes) -> str:
    """The certificate's subject DN as Java's X500Principal.getName("RFC2253")."""
    _, ss, se, _ = _tbs_fields(der)[4]
    rdns = []
    for _, rs, re_, _ in _children(der, ss, se):  # SET OF AttributeTypeAndValue
        avas = []
        for _, as_, ae, _ in _children(der, rs, re_):
            (_, os_, oe, _), (vtag, vs, ve, vstart) = _children(der, as_, ae)[:2]
            oid = _oid(der[os_:oe])
            keyword = KEYWORDS.get(oid)
            if keyword is not None and vtag in _STRINGS:
                avas.append(f"{keyword}={_escape(der[vs:ve].decode(_STRINGS[vtag]))}")
            else:
                avas.append(f"{oid}=#{der[vstart:ve].hex()}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def _time(der: bytes, tag: int, start: int, end: int) -> int:
    text = der[start:end].decode("ascii").rstrip("Z")
    if tag == 0x17:  # UTCTime YYMMDDHHMMSS: 50-99 are 19xx (RFC 5280)
        year = int(text[:2])
        text = str(1900 + year if year >= 50 else 2000 + year) + text[2:]
    y, mo, d, h, mi, s = (int(text[i:j]) for i, j in
                          ((0, 4), (4, 6), (6, 8), (8, 10), (10, 12), (12, 14)))
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))


def validity(der: bytes) -> tuple[int, int]:
    """(notBefore, notAfter) in seconds since the epoch."""
    _, vs, ve, _ = _tbs_fields(der)[3]
    (t1, s1, e1, _), (t2, s2, e2, _) = _children(der, vs, ve)[:2]
    return _time(der, t1, s1, e1), _time(der, t2, s2, e2)


def pem_certificates(pem: bytes) -> list[bytes]:
    """The DER of every CERTIFICATE block in a PEM text, in order."""
    try:
        return [base64.b64decode(b"".join(m.split())) for m in _PEM_CERT.findall(pem)]
    except ValueError as e:
        raise CertificateError(f"bad base64 in a certificate: {e}") from None
