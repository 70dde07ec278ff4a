# `kafkalite topics ...` against a real broker: the table, the JSON, and Kafka's errors.
from __future__ import annotations

from .conftest import assert_one_error_line


def test_create_list_describe_delete(cli, new_name):
    topic = new_name("topics")
    r = cli("topics", "create", "--topic", topic, "--partitions", "3",
            "--config", "retention.ms=60000")
    assert r.code == 0, r.err
    assert r.out.strip() == f"Created topic {topic}."

    r = cli("topics", "list")
    assert r.code == 0, r.err
    header, *rows = r.out.splitlines()
    assert header.split() == ["TOPIC", "PARTITIONS"]
    assert [topic, "3"] in [row.split() for row in rows]
    listed = {t["name"]: t for t in cli("topics", "list", "--json").json()}
    assert listed[topic] == {"name": topic, "partitions": 3, "internal": False}

    r = cli("topics", "describe", "--topic", topic)
    assert r.code == 0, r.err
    summary, partitions = r.out.split("\n\n")
    assert summary.splitlines()[0].split() == [
        "TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"]
    cells = summary.splitlines()[1].split()
    assert cells[0] == topic and cells[2:] == ["3", "1", "retention.ms=60000"]
    part_rows = [line.split() for line in partitions.splitlines()]
    assert part_rows[0] == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert [row[1] for row in part_rows[1:]] == ["0", "1", "2"]

    [described] = cli("topics", "describe", "--topic", topic, "--json").json()
    assert described["name"] == topic
    assert described["configs"] == {"retention.ms": "60000"}
    assert described["replication_factor"] == 1
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    leader = described["partitions"][0]["leader"]
    assert all(p["replicas"] == [leader] and p["isr"] == [leader]
               for p in described["partitions"])

    r = cli("topics", "delete", "--topic", topic)
    assert r.code == 0, r.err
    assert r.out.strip() == f"Deleted topic {topic}."
    assert topic not in {t["name"] for t in cli("topics", "list", "--json").json()}


def test_create_json_and_existing_topic(cli, new_name):
    topic = new_name("exists")
    r = cli("topics", "create", "--topic", topic, "--partitions", "2", "--json")
    assert r.code == 0, r.err
    created = r.json()
    assert created["topic"] == topic and created["created"] is True
    assert created["partitions"] == 2

    r = cli("topics", "create", "--topic", topic)
    assert_one_error_line(r, 1, "error: TOPIC_ALREADY_EXISTS:", topic)
    assert r.out == ""

    r = cli("topics", "create", "--topic", topic, "--if-not-exists", "--json")
    assert r.code == 0, r.err
    assert r.json() == {"topic": topic, "created": False}


def test_alter_partitions_and_configs(cli, new_name):
    topic = new_name("alter")
    assert cli("topics", "create", "--topic", topic, "--partitions", "1",
               "--config", "retention.ms=60000").code == 0
    r = cli("topics", "alter", "--topic", topic, "--partitions", "4",
            "--config", "cleanup.policy=compact", "--delete-config", "retention.ms")
    assert r.code == 0, r.err
    assert r.out.strip() == f"Altered topic {topic}."
    [d] = cli("topics", "describe", "--topic", topic, "--json").json()
    assert len(d["partitions"]) == 4
    assert d["configs"] == {"cleanup.policy": "compact"}

    r = cli("topics", "alter", "--topic", topic, "--partitions", "2")
    assert_one_error_line(r, 1, "error: INVALID_PARTITIONS:")
    r = cli("topics", "alter", "--topic", topic, "--config", "no.such.config=1")
    assert_one_error_line(r, 1, "error: INVALID_CONFIG:", "no.such.config")


def test_unknown_topic_errors(cli, new_name):
    missing = new_name("missing")
    for args in (("topics", "describe", "--topic", missing),
                 ("topics", "alter", "--topic", missing, "--partitions", "3"),
                 ("topics", "delete", "--topic", missing)):
        r = cli(*args)
        assert_one_error_line(r, 1, "error: UNKNOWN_TOPIC_OR_PARTITION:", missing)
    r = cli("topics", "delete", "--topic", missing, "--if-exists", "--json")
    assert r.code == 0, r.err
    assert r.json() == {"deleted": []}
    # describe must not have auto-created it
    assert missing not in {t["name"] for t in cli("topics", "list", "--json").json()}


def test_invalid_config_value_is_kafkas_error(cli, new_name):
    r = cli("topics", "create", "--topic", new_name("badcfg"), "--config", "retention.ms=abc")
    assert_one_error_line(r, 1, "error: INVALID_CONFIG:", "retention.ms")
