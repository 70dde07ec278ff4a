"""Listener parsing (names, protocol map, advertised endpoints, Kafka's refusals) and the
TLS settings' resolution (per-listener overrides, Java cipher-suite names)."""
from __future__ import annotations

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security.listeners import parse_listeners
from kafkalite.security.tls import openssl_cipher, server_context, setting
from tests.helpers.certs import make_pki


def listeners(**props: str):
    return parse_listeners(BrokerConfig({k.replace("_", "."): v for k, v in props.items()}))


def test_default_is_one_plaintext_listener_on_localhost_9092():
    [only] = parse_listeners(BrokerConfig())
    assert (only.name, only.protocol, only.host, only.port) == ("PLAINTEXT", "PLAINTEXT",
                                                               "localhost", 9092)


def test_names_map_to_protocols_and_advertise_their_own_endpoints():
    ls = listeners(listeners="PLAINTEXT://0.0.0.0:9092,SSL://:9093,INTERNAL://127.0.0.1:9094",
                   listener_security_protocol_map="PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                                  "INTERNAL:SASL_SSL",
                   advertised_listeners="PLAINTEXT://kafka.example:19092,SSL://kafka.example:19093")
    assert [(x.name, x.protocol, x.advertised_host, x.advertised_port) for x in ls] == [
        ("PLAINTEXT", "PLAINTEXT", "kafka.example", 19092),
        ("SSL", "SSL", "kafka.example", 19093),
        ("INTERNAL", "SASL_SSL", "127.0.0.1", 9094)]
    assert [(x.uses_tls, x.uses_sasl) for x in ls] == [(False, False), (True, False),
                                                        (True, True)]


@pytest.mark.parametrize("props,message", [
    ({"listeners": "PLAINTEXT://:9092,CLIENT://:9093"}, "No security protocol defined for "
                                                        "listener CLIENT"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "different name"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "different port"),
    ({"advertised.listeners": "SSL://x:9093"}, "subset"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
    ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of"),
    ({"listeners": "PLAINTEXT://:99999"}, "port out of range"),
])
def test_kafkas_refusals(props, message):
    with pytest.raises(ConfigError, match=message):
        parse_listeners(BrokerConfig(props))


def test_listener_override_beats_the_plain_property_and_is_not_an_unknown_config(caplog):
    cfg = BrokerConfig({"listeners": "SSL://:9093,MTLS://:9094",
                        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
                        "ssl.client.auth": "requested",
                        "listener.name.mtls.ssl.client.auth": "required"})
    ssl_l, mtls = parse_listeners(cfg)
    assert setting(cfg, ssl_l, "ssl.client.auth") == "requested"
    assert setting(cfg, mtls, "ssl.client.auth") == "required"
    assert "isn't a known config" not in caplog.text


@pytest.mark.parametrize("java,openssl", [
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
])
def test_java_cipher_suite_names_become_openssls(java, openssl):
    assert openssl_cipher(java) == openssl


def test_cipher_suites_and_protocols_narrow_the_context(tmp_path):
    pki = make_pki(str(tmp_path))
    cfg = BrokerConfig({"listeners": "SSL://:9093", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": pki.server_keystore,
                        "ssl.enabled.protocols": "TLSv1.2",
                        "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"})
    ctx = server_context(cfg, parse_listeners(cfg)[0])
    import ssl
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == \
        ["ECDHE-RSA-AES256-GCM-SHA384"]


def test_environment_variables_set_per_listener_overrides():
    from kafkalite.config import env_overrides
    assert env_overrides({"KAFKALITE_LISTENER_NAME_SASL_SSL_SSL_CLIENT_AUTH": "required",
                          "KAFKALITE_SSL_KEYSTORE_LOCATION": "/certs/ks.pem",
                          "KAFKALITE_LISTENER_NAME_X_NOT_A_PROPERTY": "1"}) == {
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "ssl.keystore.location": "/certs/ks.pem"}
