# `kafkalite produce` and `kafkalite consume` round trips through a real broker.
from __future__ import annotations

import json
import time

from .conftest import assert_one_error_line

IDLE = ("--timeout", "10000")  # a missing record fails the test instead of hanging it


def test_plain_lines_with_keys_and_headers(cli, kafka_topic):
    topic = kafka_topic()
    r = cli("produce", "--topic", topic, "--key-separator", ":", "--header", "source=cli",
            "--header", "n=1", stdin="k1:hello\nk2:world: with colon\n:empty key\n")
    assert r.code == 0, r.err
    assert r.out.strip() == f"Produced 3 record(s) to {topic}."

    r = cli("consume", "--topic", topic, "--from-beginning", "--max-messages", "3", *IDLE,
            "--json")
    assert r.code == 0, r.err
    records = r.json_lines()
    assert [(x["key"], x["value"]) for x in records] == [
        ("k1", "hello"), ("k2", "world: with colon"), ("", "empty key")]
    assert [x["offset"] for x in records] == [0, 1, 2]
    assert all(x["partition"] == 0 and x["topic"] == topic for x in records)
    assert all(x["headers"] == {"source": "cli", "n": "1"} for x in records)
    assert all(isinstance(x["timestamp"], int) and x["timestamp"] > 0 for x in records)

    r = cli("consume", "--topic", topic, "--from-beginning", "--count", "2", *IDLE,
            "--print-key", "--key-separator", "=", "--print-offset", "--print-headers")
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["Offset:0\tsource:cli,n:1\tk1=hello",
                                  "Offset:1\tsource:cli,n:1\tk2=world: with colon"]

    r = cli("consume", "--topic", topic, "--from-beginning", "--count", "1", *IDLE)
    assert r.out == "hello\n"


def test_json_input_partitions_and_offsets(cli, kafka_topic):
    topic = kafka_topic(partitions=2)
    # a recent explicit timestamp: an old one would be past retention and deleted
    ts = int(time.time() * 1000) - 60_000
    lines = [{"key": "a", "value": "to p1", "partition": 1, "headers": {"h": "v"}},
             {"value": "line\nbreak", "partition": 0, "timestamp": ts},
             {"key": "k", "value": {"nested": [1, 2]}, "partition": 1}]
    r = cli("produce", "--topic", topic, "--format", "json", "--json",
            stdin="".join(json.dumps(x) + "\n" for x in lines))
    assert r.code == 0, r.err
    acks = r.json_lines()
    assert [(a["partition"], a["offset"]) for a in acks] == [(1, 0), (0, 0), (1, 1)]
    assert acks[1]["timestamp"] == ts

    r = cli("consume", "--topic", topic, "--partition", "1", "--offset", "1", "--count", "1",
            *IDLE, "--json")
    assert r.code == 0, r.err
    [rec] = r.json_lines()
    assert (rec["partition"], rec["offset"], rec["key"]) == (1, 1, "k")
    assert json.loads(rec["value"]) == {"nested": [1, 2]}

    r = cli("consume", "--topic", topic, "--partition", "0", "--from-beginning",
            "--count", "1", *IDLE, "--json")
    [rec] = r.json_lines()
    assert rec["value"] == "line\nbreak" and rec["key"] is None
    assert rec["timestamp"] == ts and rec["headers"] == {}


def test_consume_stops_when_idle_and_copies_via_json(cli, kafka_topic):
    source = kafka_topic()
    target = kafka_topic()
    assert cli("produce", "--topic", source, "--value", "one", "--value", "two",
               "--key", "K", "--header", "x=y").code == 0
    # fewer records than asked for: --timeout ends the command, successfully
    r = cli("consume", "--topic", source, "--from-beginning", "--max-messages", "10",
            "--timeout", "1500", "--json")
    assert r.code == 0, r.err
    assert [x["value"] for x in r.json_lines()] == ["one", "two"]
    # consume --json output is produce --format json input
    r2 = cli("produce", "--topic", target, "--format", "json", stdin=r.out)
    assert r2.code == 0, r2.err
    copied = cli("consume", "--topic", target, "--from-beginning", "--count", "2", *IDLE,
                 "--json").json_lines()
    assert [(x["key"], x["value"], x["headers"]) for x in copied] == [
        ("K", "one", {"x": "y"}), ("K", "two", {"x": "y"})]


def test_consume_with_group_commits_offsets(cli, kafka_topic, new_name):
    topic = kafka_topic()
    group = new_name("group")
    assert cli("produce", "--topic", topic, stdin="a\nb\nc\n").code == 0
    r = cli("consume", "--topic", topic, "--group", group, "--from-beginning", "--count", "2",
            *IDLE)
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["a", "b"]
    # the group resumes where it stopped
    r = cli("consume", "--topic", topic, "--group", group, "--count", "1", *IDLE)
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["c"]


def test_produce_and_consume_errors(cli, kafka_topic, new_name):
    topic = kafka_topic()
    r = cli("produce", "--topic", topic, "--key-separator", "|", stdin="no separator\n")
    assert_one_error_line(r, 1, "error:", "no key separator", "line 1")
    r = cli("produce", "--topic", topic, "--format", "json", stdin="{not json}\n")
    assert_one_error_line(r, 1, "error:", "line 1", "invalid JSON")
    r = cli("produce", "--topic", topic, "--partition", "5", "--value", "x")
    assert_one_error_line(r, 1, "error: UNKNOWN_TOPIC_OR_PARTITION:", "Partition 5")
    r = cli("produce", "--topic", topic, "--format", "json",
            stdin='{"value": "x", "partition": 7}')
    assert_one_error_line(r, 1, "error: UNKNOWN_TOPIC_OR_PARTITION:", "Partition 7")
    # Kafka's name for error 10, not kafka-python's MESSAGE_SIZE_TOO_LARGE
    r = cli("produce", "--topic", topic, stdin="v" * 2_000_000 + "\n")
    assert_one_error_line(r, 1, "error: MESSAGE_TOO_LARGE:")
    missing = new_name("nosuch")
    r = cli("consume", "--topic", missing, "--count", "1", *IDLE)
    assert_one_error_line(r, 1, "error: UNKNOWN_TOPIC_OR_PARTITION:", missing)
    r = cli("consume", "--topic", topic, "--partition", "3", "--count", "1", *IDLE)
    assert_one_error_line(r, 1, "error: UNKNOWN_TOPIC_OR_PARTITION:", "Partition 3")
