"""Test certificates made in the test with the openssl command line (and `cryptography` for
subjects no -subj string spells, self_signed below): a CA, a server certificate for
127.0.0.1/localhost, client certificates, and broken keystores (expired, not matching its
key, garbage). Nothing is committed: every
file lives in the caller's temporary directory."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

import pytest

# Its RFC 2253 form (Java's X500Principal.getName) is CLIENT_DN: most specific first, the
# comma in O escaped, emailAddress as its OID and the hex of its DER IA5String.
CLIENT_SUBJECT = "/C=US/O=Kafkalite Tests, Inc/OU=QA/CN=client-one/emailAddress=qa@example.com"
CLIENT_DN = ("1.2.840.113549.1.9.1=#160e7161406578616d706c652e636f6d,CN=client-one,OU=QA,"
             "O=Kafkalite Tests\\, Inc,C=US")


@dataclass
class Pki:
    dir: str
    ca: str  # CA certificate (PEM): truststore of both sides
    server_key: str
    server_cert: str  # server certificate followed by the CA's
    server_keystore: str  # key + chain in one file (ssl.keystore.type=PEM)
    client_key: str
    client_cert: str
    other_ca: str  # a CA that signed nothing here

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)


def _run(*args: str, cwd: str) -> None:
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, (args, out.stderr)


def _key(d: str, name: str) -> str:
    _run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", name,
         cwd=d)
    return os.path.join(d, name)


def _ca(d: str, name: str, subject: str) -> str:
    key = _key(d, f"{name}.key")
    _run("req", "-x509", "-new", "-key", key, "-subj", subject, "-days", "30",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", f"{name}.pem", cwd=d)
    return os.path.join(d, f"{name}.pem")


def sign(pki_dir: str, name: str, subject: str, *, server: bool = False,
         start: str | None = None, end: str | None = None) -> tuple[str, str]:
    """(key, certificate) of a new leaf signed by the CA in pki_dir; start/end as
    YYYYMMDDHHMMSSZ give it that validity (an expired certificate, for instance)."""
    d = pki_dir
    key = _key(d, f"{name}.key")
    _run("req", "-new", "-key", key, "-subj", subject, "-out", f"{name}.csr", cwd=d)
    ext = ("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
           if server else "extendedKeyUsage=clientAuth\n")
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext + "basicConstraints=CA:FALSE\n")
    if start or end:
        # `openssl x509` takes no explicit dates in 3.0: a throwaway `openssl ca` does.
        db = os.path.join(d, f"{name}-db")
        os.makedirs(db, exist_ok=True)
        open(os.path.join(db, "index.txt"), "w").close()
        with open(os.path.join(db, "ca.cnf"), "w") as f:
            f.write(f"[ca]\ndefault_ca=c\n[c]\ndatabase={db}/index.txt\nnew_certs_dir={db}\n"
                    f"serial={db}/serial\ndefault_md=sha256\npolicy=p\nunique_subject=no\n"
                    "[p]\ncommonName=supplied\n")
        with open(os.path.join(db, "serial"), "w") as f:
            f.write("1000\n")
        _run("ca", "-batch", "-config", os.path.join(db, "ca.cnf"), "-cert", "ca.pem",
             "-keyfile", "ca.key", "-in", f"{name}.csr", "-out", f"{name}.pem",
             "-startdate", start or "20200101000000Z", "-enddate", end or "20200102000000Z",
             "-extfile", f"{name}.ext", "-notext", cwd=d)
    else:
        _run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "30", "-extfile", f"{name}.ext",
             "-out", f"{name}.pem", cwd=d)
    return key, os.path.join(d, f"{name}.pem")


def keystore(pki_dir: str, name: str, key: str, *certs: str) -> str:
    """One PEM file with the key, then the chain: Kafka's ssl.keystore.location format."""
    path = os.path.join(pki_dir, name)
    with open(path, "w") as out:
        for part in (key, *certs):
            with open(part) as f:
                out.write(f.read())
    os.chmod(path, 0o600)
    return path


def make_pki(directory: str) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line is not installed")
    os.makedirs(directory, exist_ok=True)
    ca = _ca(directory, "ca", "/O=Kafkalite Tests/CN=Test CA")
    skey, scert = sign(directory, "server", "/O=Kafkalite Tests/CN=localhost", server=True)
    ckey, ccert = sign(directory, "client", CLIENT_SUBJECT)
    other = os.path.join(directory, "other")
    os.makedirs(other, exist_ok=True)
    other_ca = _ca(other, "ca", "/CN=Other CA")
    chain = keystore(directory, "server-chain.pem", scert, ca)
    return Pki(directory, ca, skey, chain, keystore(directory, "server-keystore.pem", skey,
                                                    scert, ca),
               ckey, ccert, other_ca)


def self_signed(path: str, subjects: list) -> str:
    """One PEM file of self-signed certificates (P-256 keys, made with `cryptography`), one for
    each subject (a cryptography x509.Name): subjects no openssl -subj string can spell."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    now = datetime.datetime.now(datetime.timezone.utc)
    with open(path, "wb") as out:
        for subject in subjects:
            key = ec.generate_private_key(ec.SECP256R1())
            cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                    .public_key(key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(minutes=5))
                    .not_valid_after(now + datetime.timedelta(days=1))
                    .sign(key, hashes.SHA256()))
            out.write(cert.public_bytes(serialization.Encoding.PEM))
    return path
