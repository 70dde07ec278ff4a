# The inter-broker connection settings (cluster/inter_broker.py) as a cluster broker reads
# them at start, with Kafka 3.8's messages (tests/cluster/test_inter_broker_security_vs_kafka.py
# compares them with Kafka's own), and the client side of the SASL exchanges against
# kafkalite's server side.
from __future__ import annotations

import pytest

from kafkalite.cluster.inter_broker import InterBroker
from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security.listeners import parse_listeners
from kafkalite.security.sasl_client import PlainClient, ScramClient
from kafkalite.security.sasl_errors import SaslAuthenticationFailed, SaslInvalid
from kafkalite.security.sasl_plain import PlainServer
from kafkalite.security.sasl_scram import ScramServer, bootstrap_scram_users
from kafkalite.security.scram_store import ScramStore

TWO = "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="s3cret";')


def inter_broker(**props: str) -> InterBroker:
    cfg = BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", **props})
    return InterBroker(cfg, parse_listeners(cfg))


def test_the_default_is_the_listener_named_plaintext():
    ib = inter_broker(listeners=TWO)
    assert (ib.listener.name, ib.mechanism, ib.ssl_context) == ("PLAINTEXT", None, None)


def test_security_inter_broker_protocol_names_the_listener():
    ib = inter_broker(**{"listeners": TWO, "security.inter.broker.protocol": "SASL_PLAINTEXT",
                         "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                         "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                         "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                             SCRAM_JAAS})
    assert (ib.listener.name, ib.mechanism, ib.username, ib.password) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-512", "broker", "s3cret")


def test_the_broker_wide_jaas_config_is_the_fallback_and_names_are_case_blind():
    ib = inter_broker(**{"listeners": TWO, "inter.broker.listener.name": "sasl_plaintext",
                         "sasl.enabled.mechanisms": "PLAIN",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN",
                         "sasl.jaas.config": 'org.apache.kafka.common.security.plain.'
                         'PlainLoginModule required username="b" password="p" user_b="p";'})
    assert (ib.listener.name, ib.username, ib.password) == ("SASL_PLAINTEXT", "b", "p")


# (properties, Kafka 3.8's start-up refusal): test_inter_broker_security_vs_kafka.py starts
# Kafka with each of them
REFUSALS = [
    ({"listeners": "SASL_SSL://127.0.0.1:9093"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are SASL_SSL"),
    ({"listeners": TWO, "inter.broker.listener.name": "SASL_PLAINTEXT",
      "security.inter.broker.protocol": "SASL_PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be "
     "set."),
    ({"listeners": TWO, "inter.broker.listener.name": "FOO"},
     "Listener with name FOO defined in inter.broker.listener.name not found in "
     "listener.security.protocol.map."),
    ({"listeners": TWO, "inter.broker.listener.name": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol":
      "SCRAM-SHA-512"},
     "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when "
     "SASL is used for inter-broker communication"),
]


@pytest.mark.parametrize("props, message", REFUSALS)
def test_start_up_refusals_carry_kafkas_messages(props, message):
    with pytest.raises(ConfigError) as e:
        inter_broker(**props)
    assert str(e.value) == message


def test_what_kafkalite_cannot_log_in_with_is_refused_at_start():
    with pytest.raises(ConfigError, match="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 only"):
        inter_broker(**{"listeners": TWO, "inter.broker.listener.name": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match="needs username and password options in "
                       "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"):
        inter_broker(**{"listeners": TWO, "inter.broker.listener.name": "SASL_PLAINTEXT",
                        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})


def run(client, server) -> None:
    """The exchange as SaslAuthenticate carries it: client token, server answer, ..."""
    token = client.respond(b"")
    while token is not None:
        token = client.respond(server.evaluate(token))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_scram_client_logs_in_to_kafkalites_server_and_checks_its_proof(mechanism):
    store = ScramStore(None)
    bootstrap_scram_users(store, "broker=1:s3cret")  # "=" travels escaped as =3D
    server = ScramServer(mechanism, store.get)
    client = ScramClient(mechanism, "broker=1", "s3cret")
    run(client, server)
    assert client.complete and server.complete and server.principal_name == "broker=1"
    with pytest.raises(SaslInvalid):
        run(ScramClient(mechanism, "broker=1", "wrong"), ScramServer(mechanism, store.get))

    class Impostor(ScramServer):  # knows the salt, not the password: a wrong signature
        def _final(self, text: str) -> bytes:
            return b"v=" + b"A" * 88

    with pytest.raises(SaslAuthenticationFailed, match="server signature"):
        run(ScramClient(mechanism, "broker=1", "s3cret"), Impostor(mechanism, store.get))


def test_the_plain_client_logs_in():
    server = PlainServer({"broker": "pw"})
    client = PlainClient("broker", "pw")
    run(client, server)
    assert client.complete and server.principal_name == "broker"


class Registrations:
    """Live brokers' registered endpoints by listener name, answered as ZkClusterView does
    (the first endpoint for listener None, None for a listener a broker lacks)."""

    def __init__(self, endpoints: dict[int, dict[str, int]]):
        self.endpoints = endpoints

    def broker(self, node_id: int, listener):
        from kafkalite.cluster.view import BrokerNode
        ports = self.endpoints.get(node_id)
        if not ports:
            return None
        name = listener.name if listener is not None else next(iter(ports))
        return BrokerNode(node_id, "127.0.0.1", ports[name]) if name in ports else None


def test_the_other_brokers_endpoint_is_the_one_of_the_inter_broker_listener():
    from kafkalite.cluster.inter_broker import Unreachable
    ib = inter_broker(**{"listeners": TWO, "inter.broker.listener.name": "SASL_PLAINTEXT",
                         "sasl.enabled.mechanisms": "PLAIN",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN",
                         "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                             'x required username="b" password="p";'})
    view = Registrations({2: {"PLAINTEXT": 9192, "SASL_PLAINTEXT": 9193},
                          3: {"PLAINTEXT": 9292}})
    assert ib.endpoint(view, 2) == ("127.0.0.1", 9193)
    with pytest.raises(Unreachable, match="broker 3 has no endpoint for the inter-broker "
                                          "listener SASL_PLAINTEXT"):
        ib.endpoint(view, 3)
    with pytest.raises(Unreachable, match="broker 4 is not live"):
        ib.endpoint(view, 4)
    assert InterBroker().endpoint(view, 3) == ("127.0.0.1", 9292)  # no config: the first
