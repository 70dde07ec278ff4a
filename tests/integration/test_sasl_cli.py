"""`kafkalite users` (SCRAM users) with a Kafka client properties file (--command-config)
logging in over SASL_PLAINTEXT, and every command logging in with OAUTHBEARER (Kafka's
unsecured JWT login options), against kafkalite and the real Kafka 3.8 (issue 15)."""
from __future__ import annotations

import time
import uuid

import pytest

from tests.cli.conftest import assert_one_error_line, run_cli

from .sasl_targets import can_log_in, target  # noqa: F401  (the fixture)
from .test_acl_matrix import brokers  # noqa: F401  (the fixture: brokers with ACLs)

CLIENT_PROPERTIES = """\
security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
username="admin" password="admin-secret";
"""


def until(probe, timeout: float = 20.0) -> bool:
    """Kafka applies SCRAM changes through its metadata log: bounded wait."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def test_users_add_list_delete(target, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(CLIENT_PROPERTIES)
    common = ("--bootstrap-server", target.bootstrap, "--command-config", str(props))
    r = run_cli("users", "add", "--user", "dora", "--password", "dora-secret",
                "--iterations", "8192", *common)
    assert r.code == 0, r.err
    r = run_cli("users", "list", "--user", "dora", "--json", *common)
    assert r.code == 0, r.err
    assert r.json() == [{"user": "dora", "mechanism": m, "iterations": 8192}
                        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]
    login = lambda: can_log_in(target, "SCRAM-SHA-512", **{  # noqa: E731
        "sasl.username": "dora", "sasl.password": "dora-secret"})
    assert until(login)
    r = run_cli("users", "delete", "--user", "dora", "--mechanism", "SCRAM-SHA-512", *common)
    assert r.code == 0, r.err
    assert until(lambda: not login())
    r = run_cli("users", "add", "--user", "dora", "--password", "x", "--iterations", "100",
                "--mechanism", "SCRAM-SHA-256", *common)
    assert_one_error_line(r, 1, "Too few iterations")


def test_without_credentials_the_sasl_listener_refuses(target):
    r = run_cli("users", "list", "--bootstrap-server", target.bootstrap, "--timeout", "3000")
    assert r.code == 1 and r.err.strip()
    assert can_log_in(target, "PLAIN")



def test_java_client_kafka_tools_with_command_config(target, tmp_path):
    """The Java client (Kafka's own tools) over SASL_PLAINTEXT: PLAIN, then a SCRAM user
    that kafka-configs.sh creates, as Kafka's documentation does it."""
    from tests.helpers.real_kafka import anchor_dir
    if anchor_dir() is None:
        pytest.skip("no Kafka 3.8 distribution (../shared/anchors/kafka-3.8.0)")
    from tests.kafka_tools.conftest import run_tool
    plain = tmp_path / "plain.properties"
    plain.write_text(CLIENT_PROPERTIES)
    boot = ("--bootstrap-server", target.bootstrap)
    run_tool("kafka-topics.sh", *boot, "--command-config", str(plain), "--create",
             "--topic", "java-sasl", "--partitions", "1", "--replication-factor", "1")
    run_tool("kafka-configs.sh", *boot, "--command-config", str(plain), "--alter",
             "--entity-type", "users", "--entity-name", "erin",
             "--add-config", "SCRAM-SHA-256=[iterations=4096,password=erin-secret]")
    scram = tmp_path / "scram.properties"
    scram.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule"
                     ' required username="erin" password="erin-secret";\n')
    assert until(lambda: can_log_in(target, "SCRAM-SHA-256", **{
        "sasl.username": "erin", "sasl.password": "erin-secret"}))
    out = run_tool("kafka-topics.sh", *boot, "--command-config", str(scram), "--list")
    assert "java-sasl" in out.split()


OAUTH_PROPERTIES = """\
security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
    unsecuredLoginStringClaim_sub="carol" unsecuredLoginListClaim_scope=",read,write" \\
    unsecuredLoginExtension_traceId="cli-test";
"""


def test_every_command_logs_in_with_oauthbearer(target, tmp_path):
    """Each kafkalite command with an OAUTHBEARER --command-config (the JWT made from
    unsecuredLoginStringClaim_sub as Kafka's OAuthBearerUnsecuredLoginCallbackHandler does);
    the listener's 3 s re-authentication bound (sasl_targets.REAUTH_MS) is shorter than the
    group commands take, so sessions also expire and log in again."""
    props = tmp_path / "oauth.properties"
    props.write_text(OAUTH_PROPERTIES)
    common = ("--bootstrap-server", target.bootstrap, "--command-config", str(props))
    topic, group = f"oauth-{uuid.uuid4().hex[:8]}", f"oauth-g-{uuid.uuid4().hex[:8]}"

    def ok(*args: str, stdin: str | None = None):
        r = run_cli(*args, *common, stdin=stdin)
        assert r.code == 0, (args, r.err)
        return r

    ok("topics", "create", "--topic", topic, "--partitions", "1")
    assert topic in ok("topics", "list").out.split()
    ok("topics", "alter", "--topic", topic, "--partitions", "2")
    assert '"partitions"' in ok("topics", "describe", "--topic", topic, "--json").out
    ok("produce", "--topic", topic, stdin="a\nb\nc\n")
    got = ok("consume", "--topic", topic, "--group", group, "--from-beginning",
             "--max-messages", "3", "--timeout", "15000").out.split()
    assert sorted(got) == ["a", "b", "c"]
    assert group in ok("groups", "list").out
    assert topic in ok("groups", "describe", "--group", group).out
    ok("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
       "--execute")
    ok("groups", "delete", "--group", group)
    ok("transactions", "list")
    ok("users", "list")
    # No authorizer on these listeners: both brokers refuse DescribeAcls so
    r = run_cli("acls", "list", *common)
    assert_one_error_line(r, 1, "SECURITY_DISABLED")
    ok("topics", "delete", "--topic", topic)


def test_oauthbearer_config_without_a_principal_is_refused(tmp_path):
    """As Kafka's login handler: no unsecuredLoginStringClaim_sub, no token; told before
    any connection (the bootstrap address has no broker)."""
    props = tmp_path / "nosub.properties"
    props.write_text(OAUTH_PROPERTIES.replace("unsecuredLoginStringClaim_sub", "x"))
    r = run_cli("topics", "list", "--bootstrap-server", "127.0.0.1:1",
                "--command-config", str(props))
    assert_one_error_line(r, 2, "unsecuredLoginStringClaim_sub")


def test_oauthbearer_principal_is_the_sub_claim_under_acls(brokers, tmp_path):  # noqa: F811
    """On brokers with StandardAuthorizer (test_acl_matrix's pair), the CLI's OAUTHBEARER
    login acts as User:<unsecuredLoginStringClaim_sub>: `topics list` shows only the topic
    that principal may describe."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)
    from tests.helpers.real_kafka import create_topic
    who = f"oauth-{uuid.uuid4().hex[:6]}"
    props = tmp_path / "who.properties"
    props.write_text(OAUTH_PROPERTIES.replace('"carol"', f'"{who}"'))
    for t in brokers.values():
        seen, hidden = f"{who}-seen", f"{who}-hidden"
        for name in (seen, hidden):
            create_topic(t.plaintext, name)
        binding = AclBinding(ResourceType.TOPIC, seen, ResourcePatternType.LITERAL,
                             f"User:{who}", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        admin = AdminClient({"bootstrap.servers": t.plaintext})
        for fut in admin.create_acls([binding], request_timeout=30).values():
            fut.result(timeout=30)

        def listed() -> set:
            r = run_cli("topics", "list", "--bootstrap-server", t.bootstrap,
                        "--command-config", str(props))
            assert r.code == 0, (t.kind, r.err)
            return {n for n in r.out.split() if n.startswith(who)}

        assert until(lambda: listed() == {seen}), (t.kind, listed())
