"""DescribeQuorum v2's `nodes` name the listener the request came in on, with its advertised
endpoint, as Metadata does: a client on the SSL listener is never sent to the PLAINTEXT port.
kafkalite only: Kafka 3.8 serves DescribeQuorum v0-1 (v2 is Kafka 3.9's, KIP-853)."""
from __future__ import annotations

import ssl

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.certs import make_pki
from tests.helpers.real_kafka import free_port_pair
from tests.integration.test_groups_helpers import RawClient

pytestmark = pytest.mark.timeout(120)


def test_describe_quorum_v2_answers_the_requests_listener(tmp_path):
    pki = make_pki(str(tmp_path / "pki"))
    plain, tls = free_port_pair(), free_port_pair()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:{tls}",
        "advertised.listeners": f"PLAINTEXT://plain.example:{plain + 1},"
                                f"SECURE://tls.example:{tls + 1}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore}
    ctx = ssl.create_default_context(cafile=pki.ca)
    with BrokerProcess(data_dir=str(tmp_path / "data"), port=plain, settings=settings):
        answers = []
        for port, wrap in ((plain, False), (tls, True)):
            c = RawClient(f"127.0.0.1:{port}")
            if wrap:
                c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
            try:
                m = c.schema(55, 2)
                r = c.call(55, 2, topics=(m.TopicData(
                    topic_name="__cluster_metadata",
                    partitions=(m.PartitionData(partition_index=0),)),))
            finally:
                c.close()
            assert r.error_code == 0
            answers.append([(n.node_id, [(x.name, x.host, x.port) for x in n.listeners])
                            for n in r.nodes])
        node = answers[0][0][0]
        assert answers == [[(node, [("PLAINTEXT", "plain.example", plain + 1)])],
                           [(node, [("SECURE", "tls.example", tls + 1)])]]
