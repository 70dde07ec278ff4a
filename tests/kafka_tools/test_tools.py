# Kafka 3.8.0's CLI tools against kafkalite and Apache Kafka: the same command on both, the
# outputs equal after conftest.normalise.
from __future__ import annotations

import json

import pytest

from tests.kafka_tools.conftest import normalise, run_tool


def same(both: dict[str, str], tool: str, *args: str, stdin: str | None = None,
         any_order: bool = False) -> str:
    """any_order: the tool prints a list in the order of Kafka's hash map (groups), which
    nothing relies on; compare it sorted."""
    outs = {name: normalise(run_tool(tool, "--bootstrap-server", b, *args, stdin=stdin), b)
            for name, b in both.items()}
    if any_order:
        outs = {name: "\n".join(sorted(out.splitlines())) for name, out in outs.items()}
    assert outs["kafkalite"] == outs["kafka"], outs
    return outs["kafka"]


def test_console_producer_then_consumer(both: dict[str, str]) -> None:
    lines = "".join(f"{i}:value-{i}\n" for i in range(6))
    same(both, "kafka-console-producer.sh", "--topic", "tools-data", "--property",
         "parse.key=true", "--property", "key.separator=:", stdin=lines)
    out = same(both, "kafka-console-consumer.sh", "--topic", "tools-data", "--partition", "0",
               "--offset", "earliest", "--max-messages", "3", "--property", "print.key=true",
               "--property", "print.partition=true", "--timeout-ms", "15000")
    assert "Processed a total of 3 messages" in out


def test_topics_create_list(both: dict[str, str]) -> None:
    same(both, "kafka-topics.sh", "--create", "--topic", "tools-created", "--partitions", "3",
         "--config", "retention.ms=1000000")
    same(both, "kafka-topics.sh", "--list", "--exclude-internal")


def test_topics_describe(both: dict[str, str]) -> None:
    same(both, "kafka-topics.sh", "--create", "--topic", "tools-described", "--partitions", "2")
    out = same(both, "kafka-topics.sh", "--describe", "--topic", "tools-described")
    assert "PartitionCount: 2" in out


def test_configs_topic(both: dict[str, str]) -> None:
    same(both, "kafka-configs.sh", "--entity-type", "topics", "--entity-name", "tools-data",
         "--alter", "--add-config", "retention.ms=123456")
    out = same(both, "kafka-configs.sh", "--entity-type", "topics", "--entity-name",
               "tools-data", "--describe")
    assert "retention.ms=123456" in out


def test_configs_broker(both: dict[str, str]) -> None:
    same(both, "kafka-configs.sh", "--entity-type", "brokers", "--entity-name", "1",
         "--alter", "--add-config", "message.max.bytes=2000000")
    same(both, "kafka-configs.sh", "--entity-type", "brokers", "--entity-name", "1",
         "--describe")


def test_configs_client_quotas(both: dict[str, str]) -> None:
    same(both, "kafka-configs.sh", "--entity-type", "clients", "--describe")


def test_configs_users(both: dict[str, str]) -> None:
    same(both, "kafka-configs.sh", "--entity-type", "users", "--describe")


def test_get_offsets_and_delete_records(both: dict[str, str], tmp_path) -> None:
    same(both, "kafka-get-offsets.sh", "--topic", "tools-data")
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-data", "partition": 0, "offset": 0}]}))
    same(both, "kafka-delete-records.sh", "--offset-json-file", str(spec))


def test_consumer_groups(both: dict[str, str]) -> None:
    same(both, "kafka-console-consumer.sh", "--topic", "tools-data", "--group", "tools-group",
         "--from-beginning", "--max-messages", "1", "--timeout-ms", "15000")
    same(both, "kafka-consumer-groups.sh", "--list", any_order=True)
    same(both, "kafka-consumer-groups.sh", "--describe", "--group", "tools-group")
    same(both, "kafka-consumer-groups.sh", "--reset-offsets", "--group", "tools-group",
         "--topic", "tools-data", "--to-earliest", "--execute")
    same(both, "kafka-consumer-groups.sh", "--delete", "--group", "tools-group")
