# kafka-acls.sh --add/--list/--remove (Kafka 3.8.0's tool) and `kafkalite acls`
# create/list/delete against kafkalite and the real Kafka, both with StandardAuthorizer and
# super.users=User:ANONYMOUS: the same output on both. The tool prints bindings in Kafka's
# hash-set order, so lines are compared sorted within each printed block.
from __future__ import annotations

import json
import subprocess
import sys
import uuid

from tests.integration.test_acls import acl_broker  # noqa: F401  (the module's brokers)
from tests.kafka_tools.conftest import normalise, run_tool


def acls_tool(bs: str, *args: str) -> list[list[str]]:
    out = normalise(run_tool("kafka-acls.sh", "--bootstrap-server", bs, *args), bs)
    return [sorted(line.strip() for line in block.splitlines()) for block in out.split("\n\n")]


def cli(bs: str, *args: str) -> list[dict]:
    p = subprocess.run([sys.executable, "-m", "kafkalite", "acls", *args, "--bootstrap-server",
                        bs, "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_kafka_acls_tool(acl_broker):  # noqa: F811
    bs, x = acl_broker, uuid.uuid4().hex[:8]
    topic, group = f"acl-{x}", f"acl-{x}-g"
    added = acls_tool(bs, "--add", "--allow-principal", "User:alice", "--allow-principal",
                      "User:bob", "--operation", "Read", "--operation", "Describe",
                      "--topic", topic, "--group", group)
    assert any(f"name={topic}, patternType=LITERAL" in line for b in added for line in b)
    assert acls_tool(bs, "--add", "--deny-principal", "User:mallory", "--deny-host",
                     "10.0.0.9", "--operation", "All", "--resource-pattern-type", "prefixed",
                     "--topic", topic)
    listed = acls_tool(bs, "--list", "--topic", topic, "--resource-pattern-type", "match")
    text = "\n".join(line for b in listed for line in b)
    assert text.count("permissionType=ALLOW") == 4 and "User:mallory, host=10.0.0.9" in text
    assert acls_tool(bs, "--list", "--principal", "User:bob", "--topic", topic) == [sorted([
        f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, "
         "patternType=LITERAL)`:",
         "(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)",
         "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
         "ACLs for principal `User:bob`"])]
    acls_tool(bs, "--remove", "--force", "--topic", topic, "--group", group)
    assert cli(bs, "list", "--topic", topic) == []
    # The prefixed one is another resource pattern: it stays until removed by its own.
    assert [r["pattern_type"] for r in cli(bs, "list", "--topic", topic,
                                            "--resource-pattern-type", "any")] == ["PREFIXED"]
    acls_tool(bs, "--remove", "--force", "--topic", topic, "--resource-pattern-type",
              "prefixed")


def test_kafkalite_acls_cli(acl_broker):  # noqa: F811
    bs, x = acl_broker, uuid.uuid4().hex[:8]
    topic = f"cli-{x}"
    made = cli(bs, "create", "--topic", topic, "--allow-principal", "User:carol",
               "--operation", "write", "--operation", "describe")
    assert [(r["principal"], r["host"], r["operation"]) for r in made] == [
        ("User:carol", "*", "WRITE"), ("User:carol", "*", "DESCRIBE")]
    cli(bs, "create", "--cluster", "--deny-principal", "User:carol", "--operation", "alter")
    rows = cli(bs, "list", "--topic", topic)
    assert [(r["resource_type"], r["name"], r["pattern_type"], r["operation"],
             r["permission"]) for r in rows] == [
        ("TOPIC", topic, "LITERAL", "DESCRIBE", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "WRITE", "ALLOW")]
    assert len(cli(bs, "list", "--principal", "User:carol")) == 3
    gone = cli(bs, "delete", "--topic", topic, "--operation", "write")
    assert [r["operation"] for r in gone] == ["WRITE"]
    gone = cli(bs, "delete", "--allow-principal", "User:carol", "--deny-principal",
               "User:carol")
    assert sorted(r["operation"] for r in gone) == ["ALTER", "DESCRIBE"]
    assert cli(bs, "list", "--principal", "User:carol") == []
    bad = subprocess.run([sys.executable, "-m", "kafkalite", "acls", "create", "--cluster",
                          "--allow-principal", "User:a", "--operation", "any",
                          "--bootstrap-server", bs], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 1 and "UNKNOWN_SERVER_ERROR" in bad.stderr, bad.stderr
