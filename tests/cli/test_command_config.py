"""`--command-config FILE` (issue 15): the kafkalite commands log in with a Kafka client
properties file as kafka-acls.sh and kafka-topics.sh do, over the SASL_SSL listener of
test_security_e2e.py's brokers (kafkalite and Kafka 3.8 configured alike): the admin with
PLAIN, alice with SCRAM-SHA-512, the CA as a PEM truststore."""
from __future__ import annotations

import time
import uuid

from tests.cli.conftest import assert_one_error_line, run_cli
from tests.integration.test_security_e2e import PASSWORDS, broker  # noqa: F401  (fixture)

_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
            "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def command_config(tmp_path, broker, user: str, **extra: str) -> str:  # noqa: F811
    mechanism = "PLAIN" if user == "admin" else "SCRAM-SHA-512"
    lines = ["# as kafka-acls.sh --command-config takes it",
             "security.protocol=SASL_SSL", f"sasl.mechanism={mechanism}",
             # split with a trailing backslash, as Kafka's documentation writes it
             f"sasl.jaas.config={_MODULES[mechanism]} required \\",
             f'    username="{user}" password="{PASSWORDS[user]}";',
             "ssl.truststore.type=PEM", f"ssl.truststore.location={broker.ca}",
             *(f"{k.replace('_', '.')}={v}" for k, v in extra.items())]
    path = tmp_path / f"{user}.properties"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def until(probe, accept, timeout: float = 30.0):
    """Kafka applies ACLs through its metadata log: bounded retries."""
    deadline = time.monotonic() + timeout
    result = probe()
    while not accept(result) and time.monotonic() < deadline:
        time.sleep(0.5)
        result = probe()
    return result


def test_acls_and_topics_over_sasl_ssl(broker, tmp_path):  # noqa: F811
    admin = ("--bootstrap-server", broker.bootstrap,
             "--command-config", command_config(tmp_path, broker, "admin"))
    alice = ("--bootstrap-server", broker.bootstrap,
             "--command-config", command_config(tmp_path, broker, "alice"))
    prefix = f"cli-{uuid.uuid4().hex[:8]}-"
    for name in ("mine", "other"):
        r = run_cli("topics", "create", "--topic", prefix + name, *admin)
        assert r.code == 0, r.err
    r = run_cli("acls", "create", "--topic", prefix + "mine", "--resource-pattern-type",
                "prefixed", "--allow-principal", "User:alice", "--operation", "DESCRIBE",
                *admin)
    assert r.code == 0, r.err
    want = [{"resource_type": "TOPIC", "name": prefix + "mine", "pattern_type": "PREFIXED",
             "principal": "User:alice", "host": "*", "operation": "DESCRIBE",
             "permission": "ALLOW"}]
    listed = until(lambda: run_cli("acls", "list", "--topic", prefix + "mine",
                                   "--resource-pattern-type", "prefixed", "--json", *admin),
                   lambda r: r.code == 0 and r.json() == want)
    assert listed.code == 0 and listed.json() == want, (listed.err, listed.out)

    def visible(who):
        r = run_cli("topics", "list", "--json", *who)
        assert r.code == 0, r.err
        return {t["name"] for t in r.json() if t["name"].startswith(prefix)}

    assert until(lambda: visible(alice), lambda s: s == {prefix + "mine"}) == {prefix + "mine"}
    assert visible(admin) == {prefix + "mine", prefix + "other"}
    # alice is no super user: creating ACLs is CLUSTER_AUTHORIZATION_FAILED
    r = run_cli("acls", "create", "--topic", prefix + "other", "--allow-principal",
                "User:alice", "--operation", "READ", *alice)
    assert_one_error_line(r, 1, "CLUSTER_AUTHORIZATION_FAILED")


def test_without_the_config_or_with_a_wrong_password_no_answer(broker, tmp_path):  # noqa: F811
    r = run_cli("topics", "list", "--bootstrap-server", broker.bootstrap, "--timeout", "3000")
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1, r.err
    bad = tmp_path / "bad.properties"
    bad.write_text(open(command_config(tmp_path, broker, "alice")).read()
                   .replace(PASSWORDS["alice"], "wrong"))
    r = run_cli("topics", "list", "--bootstrap-server", broker.bootstrap, "--timeout", "3000",
                "--command-config", str(bad))
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1, r.err


def test_a_jks_truststore_is_refused_before_connecting(tmp_path):
    conf = tmp_path / "jks.properties"
    conf.write_text("security.protocol=SSL\nssl.truststore.type=JKS\n"
                    "ssl.truststore.location=/nonexistent/truststore.jks\n")
    r = run_cli("acls", "list", "--bootstrap-server", "127.0.0.1:1", "--command-config",
                str(conf))
    assert_one_error_line(r, 2, "ssl.truststore.type=JKS", "PEM")
    r = run_cli("topics", "list", "--bootstrap-server", "127.0.0.1:1", "--command-config",
                str(tmp_path / "missing.properties"))
    assert_one_error_line(r, 2, "missing.properties")
