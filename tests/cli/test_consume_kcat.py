# `kafkalite consume` with kcat's conveniences: exit at the end of the partitions (-e), a
# bounded idle wait, kcat -f format strings (checked byte for byte against kcat itself when
# it is installed), binary-safe key/value encodings, and null told apart from "null".
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys

from kafka import KafkaProducer

from .conftest import CALL_TIMEOUT, run_cli


def _send(bootstrap: str, topic: str, records: list[dict]) -> None:
    """Produce through kafka-python, so that keys and values can be any bytes or null."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for r in records:
        producer.send(topic, **r)
    producer.flush(30)
    producer.close()


def test_exit_at_end_with_fewer_records_than_asked(cli, kafka_broker, kafka_topic, new_name):
    topic = kafka_topic(partitions=2)
    _send(kafka_broker, topic, [{"value": b"one", "partition": 1},
                                {"value": b"two", "partition": 1}])
    # partition 0 is empty and partition 1 holds 2 of the 3 records asked for
    r = cli("consume", "--topic", topic, "--from-beginning", "--max-messages", "3",
            "--exit-at-end")
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["one", "two"]
    # as a group member: the end is reached once the group has assigned the partitions
    r = cli("consume", "--topic", topic, "--group", new_name("g"), "--from-beginning",
            "-c", "3", "-e")
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["one", "two"]
    # an empty topic is at its end at once
    r = cli("consume", "--topic", kafka_topic(), "--from-beginning", "-e")
    assert (r.code, r.out) == (0, ""), r.err


def test_one_timeout_flag_bounds_the_wait(cli, kafka_broker, kafka_topic):
    topic = kafka_topic()
    _send(kafka_broker, topic, [{"value": b"only"}])
    # without -e, fewer records than --max-messages end after --timeout ms of silence
    r = cli("consume", "--topic", topic, "--from-beginning", "--max-messages", "3",
            "--timeout", "1000")
    assert (r.code, r.out) == (0, "only\n"), r.err
    # the old name keeps working, but is no longer offered beside --timeout
    r = cli("consume", "--topic", topic, "--from-beginning", "--max-messages", "3",
            "--timeout-ms", "1000")
    assert (r.code, r.out) == (0, "only\n"), r.err
    help_text = run_cli("consume", "--help").out
    assert "--timeout MS" in help_text and "--timeout-ms" not in help_text


RECORDS = [
    {"key": b"k1", "value": b"hello", "headers": [("h", b"1"), ("g", b"2")]},
    {"key": None, "value": b"null"},
    {"key": b"k3", "value": None},
    {"key": b"tab\tkey", "value": "caf\u00e9".encode()},
]
FORMAT = r"%t|%p|%o|%k|%K|%s|%S|%h|%T|%%|\x41\t%R\n"


def _expected_line(topic: str, offset: int, rec: dict, timestamp: int) -> bytes:
    def text(b):
        return b"" if b is None else b

    def size(b):
        return b"%d" % (-1 if b is None else len(b))
    headers = b",".join(k.encode() + b"=" + v for k, v in rec.get("headers", ()))
    return b"|".join([topic.encode(), b"0", b"%d" % offset, text(rec["key"]), size(rec["key"]),
                      text(rec["value"]), size(rec["value"]), headers, b"%d" % timestamp,
                      b"%", b"A\t" + (-1 if rec["value"] is None else len(rec["value"]))
                      .to_bytes(4, "big", signed=True) + b"\n"])


def test_format_string_as_kcat(cli, kafka_broker, kafka_topic):
    topic = kafka_topic()
    _send(kafka_broker, topic, RECORDS)
    p = subprocess.run([sys.executable, "-m", "kafkalite", "consume", "--topic", topic, "--from-beginning", "-e",
                        "--bootstrap-server", kafka_broker, "--format", FORMAT],
                       capture_output=True, timeout=CALL_TIMEOUT)
    assert p.returncode == 0, p.stderr
    timestamps = [json.loads(line)["timestamp"] for line in cli(
        "consume", "--topic", topic, "--from-beginning", "-e", "--json").out.splitlines()]
    assert p.stdout == b"".join(_expected_line(topic, i, rec, timestamps[i])
                                for i, rec in enumerate(RECORDS))
    kcat = shutil.which("kcat")
    if kcat:  # the reference, where Debian's kcat is installed
        k = subprocess.run([kcat, "-b", kafka_broker, "-C", "-t", topic, "-e", "-q",
                            "-f", FORMAT], capture_output=True, timeout=CALL_TIMEOUT)
        assert k.returncode == 0, k.stderr
        assert p.stdout == k.stdout

    r = cli("consume", "--topic", topic, "--from-beginning", "-e", "--format", "%z")
    assert r.code == 2 and "unsupported formatter %z" in r.err, r.err


def test_binary_safe_values_and_keys(cli, kafka_broker, kafka_topic):
    topic = kafka_topic()
    blob = bytes(range(256))
    _send(kafka_broker, topic, [{"key": b"\xff\x00", "value": blob}])
    for fmt, decode in (("base64", base64.b64decode), ("hex", bytes.fromhex)):
        r = cli("consume", "--topic", topic, "--from-beginning", "-e", "--print-key",
                "--key-format", fmt, "--value-format", fmt)
        assert r.code == 0, r.err
        key, value = r.out.rstrip("\n").split("\t")
        assert decode(key) == b"\xff\x00" and decode(value) == blob
        [rec] = cli("consume", "--topic", topic, "--from-beginning", "-e", "--json",
                    "--key-format", fmt, "--value-format", fmt).json_lines()
        assert decode(rec["key"]) == b"\xff\x00" and decode(rec["value"]) == blob
    r = cli("consume", "--topic", topic, "--from-beginning", "-e", "--format", "%s",
            "--value-format", "utf8")
    # utf8: valid UTF-8 passes through as it is, other bytes become \xNN escapes
    assert r.out == blob[:128].decode() + "".join(f"\\x{b:02x}" for b in blob[128:])


def test_null_is_not_the_string_null(cli, kafka_broker, kafka_topic):
    topic = kafka_topic()
    # a producer sends a null key or a null value, never both
    _send(kafka_broker, topic, [{"key": b"null", "value": b"null"},
                                {"key": None, "value": b"v"}, {"key": b"k", "value": None}])
    base = ("consume", "--topic", topic, "--from-beginning", "-e", "--print-key")
    assert cli(*base).out.splitlines() == ["null\tnull", "\tv", "k\t"]
    assert cli(*base, "-Z").out.splitlines() == ["null\tnull", "NULL\tv", "k\tNULL"]
    assert cli(*base, "--null", "<none>").out.splitlines() == [
        "null\tnull", "<none>\tv", "k\t<none>"]
    records = cli("consume", "--topic", topic, "--from-beginning", "-e", "--json").json_lines()
    assert [(r["key"], r["value"]) for r in records] == [
        ("null", "null"), (None, "v"), ("k", None)]


def test_format_and_json_exclude_each_other(dead_bootstrap):
    r = run_cli("consume", "--topic", "t", "--format", "%s", "--json",
                "--bootstrap-server", dead_bootstrap)
    assert r.code == 2 and "do not go together" in r.err, r.err
