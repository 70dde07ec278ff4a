# `kafkalite groups ...` against a real group coordinator: lag, resets, deletes, and the
# refusals Kafka's tool gives for groups with active members.
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from .conftest import assert_one_error_line


@pytest.fixture
def group_with_offsets(kafka_broker, kafka_topic, new_name):
    """A 2-partition topic with 3 + 2 records and an inactive group that has committed 2 on
    partition 0 and 1 on partition 1. Set up in-process: the CLI is what is under test."""
    topic, group = kafka_topic(partitions=2), new_name("group")
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    for partition, values in ((0, b"abc"), (1, b"de")):
        for v in values:
            producer.send(topic, bytes([v]), partition=partition)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker, group_id=group,
                             enable_auto_commit=False)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1),
                     TopicPartition(topic, 1): OffsetAndMetadata(1, "", -1)})
    consumer.close(autocommit=False)
    return topic, group


def _offsets(cli, group: str) -> dict:
    [d] = cli("groups", "describe", "--group", group, "--json").json()
    return {o["partition"]: (o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in d["offsets"]}


def test_list_and_describe_lag(cli, group_with_offsets):
    topic, group = group_with_offsets
    r = cli("groups", "list")
    assert r.code == 0, r.err
    rows = [line.split() for line in r.out.splitlines()]
    assert rows[0] == ["GROUP", "STATE", "PROTOCOL-TYPE"]
    assert [group, "Empty", "consumer"] in rows[1:] or [group, "Empty", "-"] in rows[1:]
    assert group in {g["group"] for g in cli("groups", "list", "--json").json()}

    r = cli("groups", "describe", "--group", group)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"Consumer group '{group}': state Empty, 0 member(s)"
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [line.split()[:6] for line in lines[2:]] == [
        [group, topic, "0", "2", "3", "1"], [group, topic, "1", "1", "2", "1"]]

    [d] = cli("groups", "describe", "--group", group, "--json").json()
    assert d["group"] == group and d["state"] == "Empty" and d["members"] == []
    assert [(o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in d["offsets"]] == [(topic, 0, 2, 3, 1), (topic, 1, 1, 2, 1)]


def test_reset_offsets_dry_run_then_execute(cli, group_with_offsets):
    topic, group = group_with_offsets
    r = cli("groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest")
    assert r.code == 0, r.err
    rows = [line.split() for line in r.out.splitlines()]
    assert rows == [["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
                    [group, topic, "0", "2", "0"], [group, topic, "1", "1", "0"]]
    assert "dry run" in r.err
    assert _offsets(cli, group) == {0: (2, 3, 1), 1: (1, 2, 1)}  # nothing changed

    r = cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-latest",
            "--execute", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    assert plan["executed"] is True
    assert [(o["partition"], o["previous_offset"], o["new_offset"])
            for o in plan["offsets"]] == [(0, 2, 3), (1, 1, 2)]
    assert _offsets(cli, group) == {0: (3, 3, 0), 1: (2, 2, 0)}

    # --to-offset is clamped to the log end, and only the named partition moves
    r = cli("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:1",
            "--to-offset", "99", "--execute", "--json")
    assert [(o["partition"], o["new_offset"]) for o in r.json()["offsets"]] == [(1, 2)]
    r = cli("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0",
            "--shift-by", "-2", "--execute")
    assert r.code == 0, r.err
    assert _offsets(cli, group) == {0: (1, 3, 2), 1: (2, 2, 0)}

    # a time before every record resolves to the earliest offset
    r = cli("groups", "reset-offsets", "--group", group, "--all-topics",
            "--to-datetime", "2001-01-01T00:00:00Z", "--json")
    assert [o["new_offset"] for o in r.json()["offsets"]] == [0, 0]


def test_active_group_is_refused_then_deleted(cli, kafka_broker, group_with_offsets):
    topic, group = group_with_offsets
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker, group_id=group,
                             client_id="cli-test-member", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 60  # by time: poll() returns early around rebalances
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
            if consumer.assignment():
                break
        assert consumer.assignment(), "the test consumer never got partitions"
        [d] = cli("groups", "describe", "--group", group, "--json").json()
        assert d["state"] == "Stable" and len(d["members"]) == 1
        assert d["members"][0]["client_id"] == "cli-test-member"
        assert sorted(p["partition"] for p in d["members"][0]["assignment"]) == [0, 1]
        assert {o["client_id"] for o in d["offsets"]} == {"cli-test-member"}

        r = cli("groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                "--execute")
        assert_one_error_line(r, 1, "error: NON_EMPTY_GROUP:", "inactive", "Stable")
        r = cli("groups", "delete", "--group", group)
        assert_one_error_line(r, 1, "error: NON_EMPTY_GROUP:", group)
    finally:
        consumer.close()

    r = cli("groups", "delete", "--group", group)
    assert r.code == 0, r.err
    assert r.out.strip() == f"Deleted consumer group {group}."
    r = cli("groups", "describe", "--group", group)
    assert_one_error_line(r, 1, "error: GROUP_ID_NOT_FOUND:", group)
    r = cli("groups", "delete", "--group", group)
    assert_one_error_line(r, 1, "error: GROUP_ID_NOT_FOUND:", group)


def test_reset_offsets_warns_when_it_clamps(cli, group_with_offsets):
    topic, group = group_with_offsets
    # partition 0 holds offsets 0-2 (log end 3), partition 1 offsets 0-1 (log end 2)
    r = cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "99")
    assert r.code == 0, r.err
    warnings = [line for line in r.err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: New offset (99) is higher than latest offset for topic partition "
        f"{topic}-0. Value will be set to 3",
        f"warning: New offset (99) is higher than latest offset for topic partition "
        f"{topic}-1. Value will be set to 2"]
    r = cli("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:1",
            "--shift-by", "-5", "--json")
    assert r.code == 0, r.err
    assert [(o["partition"], o["new_offset"]) for o in r.json()["offsets"]] == [(1, 0)]
    assert r.err.splitlines()[0] == (
        f"warning: New offset (-4) is lower than earliest offset for topic partition "
        f"{topic}-1. Value will be set to 0")
    # a target inside the log says nothing but the dry-run note
    r = cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1")
    assert "warning:" not in r.err and "dry run" in r.err
