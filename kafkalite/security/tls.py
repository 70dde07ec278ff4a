# TLS for the SSL and SASL_SSL listeners: one ssl.SSLContext per listener, built at start
# from Kafka's properties, `listener.name.<listener>.ssl.*` first, then `ssl.*`:
#   ssl.keystore.type=PEM with ssl.keystore.location (key and certificate chain in one file)
#     or inline ssl.keystore.key + ssl.keystore.certificate.chain; ssl.key.password for an
#     encrypted key. JKS and PKCS12 are refused: Python's ssl module reads PEM only.
#   ssl.truststore.type=PEM with ssl.truststore.location or inline ssl.truststore.certificates
#     (the CAs that client certificates must chain to).
#   ssl.client.auth none|requested|required (mutual TLS), ssl.enabled.protocols (TLSv1.2,
#     TLSv1.3), ssl.cipher.suites (Java/IANA names, translated to OpenSSL's; the TLS 1.3
#     suites cannot be narrowed through Python's ssl module and are accepted as they are),
#     ssl.protocol (checked).
# A keystore that cannot be read, holds no certificate, whose key does not match or needs a
# password, or whose certificate has expired (or is not valid yet) raises TlsConfigError
# with one line that names the listener and the property: `kafkalite serve` exits 1 with it.
#
# A TLS client's principal is `User:` + its certificate's subject DN in RFC 2253 form, as
# Kafka's DefaultKafkaPrincipalBuilder gives with ssl.principal.mapping.rules=DEFAULT;
# without a certificate, User:ANONYMOUS.
from __future__ import annotations

import os
import ssl
import tempfile
import time
from typing import Any

from ..config_values import parse_value
from .listeners import Listener
from .x509 import CertificateError, der_certificate, pem_certificates, subject_rfc2253, validity

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
_KX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-",
       "DHE_DSS": "DHE-DSS-", "RSA": ""}


class TlsConfigError(Exception):
    """A listener's TLS settings that stop the broker from starting."""


def setting(cfg: Any, listener: Listener, key: str) -> Any:
    """A property for this listener: `listener.name.<name>.<key>` overrides `<key>`."""
    from ..config import PROPS
    raw = cfg.explicit.get(listener.config_prefix + key)
    if raw is None:
        return cfg[key]
    prop = PROPS[key]
    return parse_value(listener.config_prefix + key, prop.type, raw, prop.check)


def server_context(cfg: Any, listener: Listener) -> ssl.SSLContext:
    """The listener's SSLContext; raises TlsConfigError with one clear line."""
    def get(key: str) -> Any:
        return setting(cfg, listener, key)

    def fail(msg: str) -> TlsConfigError:
        return TlsConfigError(f"listener {listener.name}: {msg}")

    proto = get("ssl.protocol")
    if proto not in ("TLS", "TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1"):
        raise fail(f"ssl.protocol={proto} is not a TLS protocol Python's ssl module offers")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, get, fail)
    _load_truststore(ctx, get, fail)
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise fail(f"ssl.client.auth={auth}: expected none, requested or required")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    versions = [v.strip() for v in (get("ssl.enabled.protocols") or "").split(",") if v.strip()]
    unknown = [v for v in versions if v not in _VERSIONS]
    if unknown or not versions:
        raise fail(f"ssl.enabled.protocols={','.join(versions)}: expected some of "
                   f"{', '.join(_VERSIONS)}")
    try:
        ctx.minimum_version = min(_VERSIONS[v] for v in versions)
        ctx.maximum_version = max(_VERSIONS[v] for v in versions)
    except ValueError as e:
        raise fail(f"ssl.enabled.protocols: {e}") from None
    suites = [s.strip() for s in (get("ssl.cipher.suites") or "").split(",") if s.strip()]
    tls12 = [openssl_cipher(s) for s in suites if not _is_tls13_suite(s)]
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise fail(f"ssl.cipher.suites: none of {', '.join(suites)} is available") \
                from None
    return ctx


def _is_tls13_suite(name: str) -> bool:
    return name.startswith("TLS_") and "_WITH_" not in name


def openssl_cipher(name: str) -> str:
    """A Java/IANA TLS 1.2 suite name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) as OpenSSL
    names it (ECDHE-RSA-AES128-GCM-SHA256); OpenSSL names pass through."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, rest = name[4:].partition("_WITH_")
    prefix = _KX.get(kx, kx.replace("_", "-") + "-")
    parts = rest.split("_")
    mac = parts[-1]
    cipher = parts[:-1]
    if cipher[:1] == ["AES"] and len(cipher) >= 2:
        body = "AES" + cipher[1] + ("-" + "-".join(cipher[2:]) if cipher[2:] != ["CBC"] else "")
    else:
        body = "-".join(cipher)
    if body.endswith(("GCM", "POLY1305", "CCM")):
        return prefix + body + ("-" + mac if body.endswith("GCM") else "")
    return prefix + body + "-" + mac


def _load_keystore(ctx: ssl.SSLContext, get: Any, fail: Any) -> None:
    kind = (get("ssl.keystore.type") or "").upper()
    location, key, chain = (get("ssl.keystore.location"), get("ssl.keystore.key"),
                            get("ssl.keystore.certificate.chain"))
    if not location and not (key and chain):
        raise fail("an SSL listener needs ssl.keystore.location, or ssl.keystore.key and "
                   "ssl.keystore.certificate.chain")
    if kind != "PEM":
        raise fail(f"ssl.keystore.type={kind}: kafkalite reads PEM keystores only (Python's "
                   "ssl module has no JKS or PKCS12); convert the keystore to PEM (a key "
                   "and its certificate chain) and set ssl.keystore.type=PEM")
    if location:
        try:
            with open(location, "rb") as f:
                pem = f.read()
        except OSError as e:
            raise fail(f"cannot read ssl.keystore.location {location}: {e.strerror}") from None
        what = f"ssl.keystore.location {location}"
    else:
        pem = key.encode() + b"\n" + chain.encode() + b"\n"
        what = "ssl.keystore.key / ssl.keystore.certificate.chain"
    _check_certificates(pem, what, fail)
    password = get("ssl.key.password")
    fd, path = tempfile.mkstemp(prefix="kafkalite-keystore-")
    try:
        with os.fdopen(fd, "wb") as f:  # load_cert_chain reads files only
            f.write(pem)
        # A callable password: OpenSSL must never prompt on the terminal for one.
        ctx.load_cert_chain(path, password=lambda: (password or "").encode())
    except ssl.SSLError as e:
        reason = str(e.reason or e)
        if "KEY_VALUES_MISMATCH" in reason:
            raise fail(f"{what}: the private key does not match the certificate") from None
        if "BAD_DECRYPT" in reason or "bad decrypt" in str(e).lower():
            raise fail(f"{what}: cannot decrypt the private key "
                       f"({'wrong' if password else 'no'} ssl.key.password)") from None
        raise fail(f"{what}: no usable private key and certificate ({reason})") from None
    finally:
        os.unlink(path)


def _check_certificates(pem: bytes, what: str, fail: Any) -> None:
    try:
        certs = pem_certificates(pem)
        if not certs:
            raise fail(f"{what}: no PEM certificate in it")
        now = time.time()
        for cert in certs:
            not_before, not_after = validity(cert)
            subject = subject_rfc2253(cert)
            if now > not_after:
                raise fail(f"{what}: certificate {subject} expired on "
                           f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(not_after))}")
            if now < not_before:
                raise fail(f"{what}: certificate {subject} is not valid before "
                           f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(not_before))}")
    except CertificateError as e:
        raise fail(f"{what}: invalid certificate ({e})") from None


def _load_truststore(ctx: ssl.SSLContext, get: Any, fail: Any) -> None:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if not location and not inline:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    kind = (get("ssl.truststore.type") or "").upper()
    if kind != "PEM":
        raise fail(f"ssl.truststore.type={kind}: kafkalite reads PEM truststores only "
                   "(Python's ssl module has no JKS or PKCS12); set ssl.truststore.type=PEM")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(cadata=inline)
    except FileNotFoundError:
        raise fail(f"cannot read ssl.truststore.location {location}") from None
    except (ssl.SSLError, OSError) as e:
        raise fail(f"ssl.truststore: no usable certificate ({e})") from None


def peer_principal(transport: Any) -> str:
    """`User:<subject DN, RFC 2253>` of the client certificate, else User:ANONYMOUS."""
    obj = transport.get_extra_info("ssl_object")
    der = obj.getpeercert(binary_form=True) if obj is not None else None
    if not der:
        return ANONYMOUS
    try:
        return "User:" + subject_rfc2253(der_certificate(der))
    except CertificateError:
        return ANONYMOUS
