# kcat (Debian's package, linked against an older librdkafka than confluent-kafka bundles)
# against kafkalite: produce with keys and headers under each compression codec and with
# idempotence, consume to the end, a balanced (-G) consumer whose commit a second run resumes
# from, metadata listing (-L -J) and offsets by timestamp (-Q). When kcat is missing and this
# runs as root with apt-get, the test installs the `kcat` package; otherwise it skips.
from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

TIMEOUT_S = 180


@pytest.fixture(scope="module")
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "kcat"]):
            try:
                subprocess.run(cmd, capture_output=True, timeout=300,
                               env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
            except subprocess.TimeoutExpired:
                break
        path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed and `apt-get install kcat` was not possible "
                    "(not root, no apt-get, or no Debian mirror)")
    return path


def run(kcat: str, args: list[str], stdin: str | None = None) -> str:
    """Run kcat, fail the test with its output on a non-zero exit; return stdout."""
    try:
        done = subprocess.run([kcat, *args], input=stdin, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"kcat {' '.join(args)} did not finish in {TIMEOUT_S} s:\n{e.stderr}")
    assert done.returncode == 0, (f"kcat {' '.join(args)} exited {done.returncode}:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


FORMAT = "%p|%o|%k|%s|%h|%T\n"


def consume_all(kcat: str, broker: str, topic: str, extra: tuple[str, ...] = ()) -> list[dict]:
    out = run(kcat, ["-b", broker, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                     "-f", FORMAT, *extra])
    rows = []
    for line in out.splitlines():
        p, o, k, v, h, ts = line.split("|")
        rows.append({"partition": int(p), "offset": int(o), "key": k, "value": v,
                     "headers": dict(kv.split("=", 1) for kv in h.split(",")) if h else {},
                     "timestamp": int(ts)})
    return rows


def produce(kcat: str, broker: str, topic: str, lines: list[str], *options: str) -> None:
    run(kcat, ["-b", broker, "-t", topic, "-P", "-K:", *options], stdin="\n".join(lines) + "\n")


def stored_batches(broker: str, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(base offset, codec, producer id) of each stored batch, read by a hand-built Fetch v4
    so that what kcat's librdkafka chose (compression, idempotence) is seen as stored."""
    name = topic.encode()
    body = (struct.pack(">hhi", 1, 4, 7) + struct.pack(">h", 12) + b"kcat-oracle"[:12].ljust(12)
            + struct.pack(">iiiib", -1, 0, 1, 16 << 20, 0)
            + struct.pack(">ih", 1, len(name)) + name
            + struct.pack(">iiqi", 1, partition, 0, 16 << 20))
    host, port = broker.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = s.recv(1 << 20)
            assert chunk, "broker closed the connection"
            buf += chunk
    pos = 4 + 4 + 4  # size, correlation id, throttle
    assert struct.unpack_from(">i", buf, pos)[0] == 1
    pos += 4
    pos += 2 + struct.unpack_from(">h", buf, pos)[0] + 4  # topic name, partition count
    _, error, _, _, aborted = struct.unpack_from(">ihqqi", buf, pos)
    assert error == 0, f"fetch error {error}"
    pos += 26 + 16 * max(aborted, 0)
    size = struct.unpack_from(">i", buf, pos)[0]
    records, out, at = buf[pos + 4:pos + 4 + size], [], 0
    while at + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, at)
        attributes = struct.unpack_from(">h", records, at + 21)[0]
        producer_id = struct.unpack_from(">q", records, at + 43)[0]
        out.append((base, attributes & 7, producer_id))
        at += 12 + length
    return out


def check_partitioning(rows: list[dict]) -> None:
    by_key: dict[str, int] = {}
    for r in rows:
        assert by_key.setdefault(r["key"], r["partition"]) == r["partition"], r
    for p in {r["partition"] for r in rows}:
        offsets = sorted(r["offset"] for r in rows if r["partition"] == p)
        assert offsets == list(range(len(offsets))), f"partition {p} offsets {offsets[:20]}"


CODECS = [("none", ()), ("gzip", ("-z", "gzip")), ("snappy", ("-z", "snappy")),
          ("lz4", ("-z", "lz4")), ("zstd", ("-z", "zstd")),
          ("idempotent-lz4", ("-z", "lz4", "-X", "enable.idempotence=true"))]


def test_kcat_produce_consume_keys_headers_codecs(kcat, kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=3)
    sent = {}
    for name, options in CODECS:
        lines = [f"{name}-key-{i % 17}:{name}-value-{i}" for i in range(100)]
        produce(kcat, kafka_broker, topic, lines, "-H", f"codec={name}", "-H", "origin=kcat",
                *options)
        sent.update({line.split(":", 1)[1]: (name, line.split(":", 1)[0]) for line in lines})
    rows = consume_all(kcat, kafka_broker, topic)
    values = [r["value"] for r in rows]
    assert len(values) == len(set(values)) == len(sent), (len(values), len(set(values)))
    for r in rows:
        codec, key = sent[r["value"]]
        assert r["key"] == key
        assert r["headers"] == {"codec": codec, "origin": "kcat"}, r
    assert {r["partition"] for r in rows} == {0, 1, 2}
    check_partitioning(rows)
    # Each run's batches are stored with the codec asked for (librdkafka silently sends
    # uncompressed batches when it thinks the broker cannot take them).
    codec_ids = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "idempotent-lz4": 3}
    run_of = {(r["partition"], r["offset"]): r["headers"]["codec"] for r in rows}
    seen = set()
    for p in (0, 1, 2):
        for base, codec, producer_id in stored_batches(kafka_broker, topic, p):
            name = run_of[(p, base)]
            seen.add(name)
            assert codec == codec_ids[name], f"p{p}@{base} ({name}): stored codec {codec}"
            assert (producer_id >= 0) == name.startswith("idempotent"), (p, base, producer_id)
    assert seen == set(codec_ids)


def test_kcat_balanced_consumer_commits(kcat, kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=3)
    group = f"kcat-{topic}"
    produce(kcat, kafka_broker, topic, [f"k{i}:v{i}" for i in range(60)])

    def balanced(*extra: str) -> list[str]:
        out = run(kcat, ["-b", kafka_broker, "-G", group, "-e", "-q", "-f", "%p|%s\n",
                         "-X", "enable.auto.commit=true", *extra, topic])
        return sorted(line.split("|")[1] for line in out.splitlines())

    assert balanced("-o", "beginning") == sorted(f"v{i}" for i in range(60))
    # The first run committed on close; a new member of the same group resumes there.
    produce(kcat, kafka_broker, topic, [f"k{i}:late{i}" for i in range(6)])
    assert balanced() == sorted(f"late{i}" for i in range(6))
    oracle = KafkaConsumer(bootstrap_servers=kafka_broker, group_id=group,
                           enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        ends = oracle.end_offsets(tps)
        assert sum(ends.values()) == 66
        assert {tp: oracle.committed(tp) for tp in tps} == ends
    finally:
        oracle.close()


def test_kcat_metadata_listing(kcat, kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=3)
    meta = json.loads(run(kcat, ["-b", kafka_broker, "-L", "-J", "-t", topic]))
    [broker] = meta["brokers"]
    assert broker["name"] == kafka_broker
    assert meta["controllerid"] == broker["id"]
    [t] = meta["topics"]
    assert t["topic"] == topic and "error" not in t, t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    for p in t["partitions"]:
        assert p["leader"] == broker["id"] and "error" not in p, p
        assert [r["id"] for r in p["replicas"]] == [r["id"] for r in p["isrs"]] == [broker["id"]]
    everything = json.loads(run(kcat, ["-b", kafka_broker, "-L", "-J"]))
    assert topic in {x["topic"] for x in everything["topics"]}


def query(kcat: str, broker: str, topic: str, partition: int, ts: int) -> int:
    out = run(kcat, ["-b", broker, "-Q", "-t", f"{topic}:{partition}:{ts}"])
    # "<topic> [<partition>] offset <n>"
    head, offset = out.strip().rsplit(" offset ", 1)
    assert head == f"{topic} [{partition}]", out
    return int(offset)


def test_kcat_query_offsets_by_timestamp(kcat, kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=3)
    produce(kcat, kafka_broker, topic, [f"k{i}:early{i}" for i in range(30)])
    middle = int(time.time() * 1000)
    time.sleep(0.05)  # CreateTime of the second batch is strictly after `middle`
    produce(kcat, kafka_broker, topic, [f"k{i}:late{i}" for i in range(30)])
    rows = consume_all(kcat, kafka_broker, topic)
    assert len(rows) == 60
    for p in (0, 1, 2):
        mine = [r for r in rows if r["partition"] == p]
        late = [r["offset"] for r in mine if r["timestamp"] >= middle]
        assert late and len(late) < len(mine), f"partition {p} needs both batches: {mine}"
        assert query(kcat, kafka_broker, topic, p, 0) == 0
        assert query(kcat, kafka_broker, topic, p, middle) == min(late)
        last = max(r["timestamp"] for r in mine)
        assert query(kcat, kafka_broker, topic, p, last) == min(
            r["offset"] for r in mine if r["timestamp"] >= last)
        # After every record's timestamp: no such offset, which Kafka answers with -1.
        assert query(kcat, kafka_broker, topic, p, last + 3_600_000) == -1
