# The listener and TLS properties of Kafka's broker table (security/listeners.py and
# security/tls.py read them), as (name, type, default, sensitive, doc); config.py turns
# them into Props. Each ssl.* property can also be set per listener as
# `listener.name.<lower-case listener name>.ssl.*`, which BrokerConfig keeps unwarned.
from __future__ import annotations

from typing import Any, Mapping

LISTENER_PREFIX = "listener.name."

LISTENER_PROPS: list[tuple[str, str, Any, bool, str]] = [
    ("listener.security.protocol.map", "string",
     "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", False,
     "Listener name to security protocol."),
    ("inter.broker.listener.name", "string", None, False,
     "The listener brokers of a cluster connect to each other on."),
    ("security.inter.broker.protocol", "string", "PLAINTEXT", False,
     "Without inter.broker.listener.name: the listener of that name is the inter-broker one."),
    ("ssl.keystore.type", "string", "JKS", False, "Only PEM is read."),
    ("ssl.keystore.location", "string", None, False, "PEM file: private key and chain."),
    ("ssl.keystore.password", "string", None, True, "Not used by PEM keystores."),
    ("ssl.keystore.key", "string", None, True, "Inline PEM private key."),
    ("ssl.keystore.certificate.chain", "string", None, True, "Inline PEM certificate chain."),
    ("ssl.key.password", "string", None, True, "Password of an encrypted private key."),
    ("ssl.truststore.type", "string", "JKS", False, "Only PEM is read."),
    ("ssl.truststore.location", "string", None, False, "PEM file of trusted CAs."),
    ("ssl.truststore.password", "string", None, True, "Not used by PEM truststores."),
    ("ssl.truststore.certificates", "string", None, True, "Inline PEM trusted CAs."),
    ("ssl.client.auth", "string", "none", False, "none, requested or required (mutual TLS)."),
    ("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", False, ""),
    ("ssl.cipher.suites", "list", "", False, "TLS 1.2 suites; TLS 1.3's are not narrowed."),
    ("ssl.protocol", "string", "TLSv1.3", False, ""),
    ("ssl.endpoint.identification.algorithm", "string", "https", False,
     "Client-side setting; no effect on a broker with no outgoing connections."),
    ("ssl.principal.mapping.rules", "string", "DEFAULT", False,
     "Only DEFAULT: the principal is the subject DN."),
]


def listener_override(suffix: str, known: Mapping[str, str]) -> str | None:
    """LISTENER_NAME_SASL_SSL_SSL_CLIENT_AUTH -> listener.name.sasl_ssl.ssl.client.auth: the
    longest known property at the end, the listener name (underscores and all) before it."""
    head = LISTENER_PREFIX.upper().replace(".", "_")
    if not suffix.startswith(head):
        return None
    rest = suffix[len(head):]
    for env in sorted(known, key=len, reverse=True):
        if rest.endswith("_" + env) and len(rest) > len(env) + 1:
            return f"{LISTENER_PREFIX}{rest[:-len(env) - 1].lower()}.{known[env]}"
    return None
