# Kafka's authentication counters (socket-server-metrics successful-/failed-authentication
# and -reauthentication totals, per listener) on kafkalite's Prometheus endpoint: each raw
# SASL exchange below moves exactly one of them.
from __future__ import annotations

from kafkalite.testing import BrokerProcess, free_port
from tests.integration.sasl_targets import SASL_SETTINGS, RawSasl
from tests.test_metrics import metric, scrape

PREFIX = "kafka_server_socket_server_metrics_"


def counts(mport: int) -> dict[str, float]:
    samples = scrape(mport)
    return {name: metric(samples, PREFIX + name + "_total", listener="SASL_PLAINTEXT")
            for name in ("successful_authentication", "failed_authentication",
                         "successful_reauthentication", "failed_reauthentication")}


def test_authentication_outcomes_are_counted(tmp_path):
    port, mport = free_port(), free_port()
    with BrokerProcess(port=port, data_dir=str(tmp_path / "d"), settings={
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", **SASL_SETTINGS,
            "connection.failed.authentication.delay.ms": "10",
            "connections.max.reauth.ms": "60000",  # re-authentication is offered (KIP-368)
            "kafkalite.metrics.port": str(mport)}) as bp:
        def session(step) -> None:
            c = RawSasl(bp.bootstrap)
            try:
                step(c)
            finally:
                c.close()

        session(lambda c: c.login_plain())
        assert counts(mport) == {"successful_authentication": 1, "failed_authentication": 0,
                                 "successful_reauthentication": 0,
                                 "failed_reauthentication": 0}

        def reauthenticate(c: RawSasl) -> None:
            assert c.login_plain()[0] == 0
            assert c.login_plain()[0] == 0  # KIP-368: a second handshake on the session
            assert c.handshake("PLAIN")[0] == 0
            assert c.authenticate(b"\0alice\0wrong")[0] == 58  # SASL_AUTHENTICATION_FAILED
        session(reauthenticate)
        session(lambda c: c.login_plain(password="wrong"))
        session(lambda c: c.handshake("GSSAPI"))
        assert counts(mport) == {"successful_authentication": 2, "failed_authentication": 2,
                                 "successful_reauthentication": 1,
                                 "failed_reauthentication": 1}
