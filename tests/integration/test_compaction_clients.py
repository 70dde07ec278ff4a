# A compacted topic after the log cleaner ran, read back by each of the three Python clients
# (confluent-kafka, kafka-python, aiokafka) on kafkalite and on the real Kafka 3.8: keyed
# updates, tombstones, a committed and an aborted transaction, so the cleaned log has offset
# gaps inside batches, between batches, and where transaction markers sit. Each client reads
# from the beginning exactly the latest value of each key (tombstones kept: they are inside
# delete.retention.ms), aborted values never, offsets increasing, with no error on the gaps.
#
# The same cleaning seen by operators: `kafka-log-dirs.sh --describe` reports the partition's
# size falling (DescribeLogDirs), on both brokers; `kafkalite dump-log --summary` on the
# partition directory shows fewer records than offsets and the sizes DescribeLogDirs counts,
# and on either broker's cleaned files prints the batch lines kafka-dump-log.sh prints.
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kafkalite.testing import BrokerProcess
from tests.helpers import kclients
from tests.helpers.real_kafka import RealKafka, anchor_dir, create_topic, unavailable_reason
from tests.integration.test_compaction_vs_kafka import read_all

KEYS = 60
ROUNDS = 3
DELETED = range(0, KEYS, 7)  # tombstoned in the last round
COMMITTED = range(0, KEYS, 3)  # updated in a committed transaction
ABORTED = range(1, KEYS, 3)  # updated in an aborted one
SEGMENT_MS = 1000
BROKER = {"log.cleaner.backoff.ms": "200"}
# cleanup.policy=delete while producing, so that the size before cleaning is measured;
# then switched to compact
TOPIC = {"cleanup.policy": "delete", "segment.bytes": "4096", "segment.ms": str(SEGMENT_MS),
         "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "1000"}
TOOL_TIMEOUT_S = 90

Rec = tuple[int, bytes, "bytes | None"]


def _acked(out: list[Rec]):
    def on_delivery(err, msg):
        assert err is None, err
        out.append((msg.offset(), msg.key(), msg.value()))
    return on_delivery


def produce(bootstrap: str, topic: str) -> tuple[list[Rec], list[Rec]]:
    """The workload: (records whose values count, aborted records)."""
    plain: list[Rec] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 25,
                  "enable.idempotence": False})
    cb = _acked(plain)
    for r in range(ROUNDS):
        for k in range(KEYS):
            gone = r == ROUNDS - 1 and k in DELETED
            p.produce(topic, None if gone else b"v-%d-%d" % (k, r), b"key-%d" % k,
                      on_delivery=cb)
        assert p.flush(30) == 0
    committed: list[Rec] = []
    aborted: list[Rec] = []
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex,
                  "linger.ms": 5})
    t.init_transactions(60)
    for keys, out, end in ((COMMITTED, committed, t.commit_transaction),
                           (ABORTED, aborted, t.abort_transaction)):
        t.begin_transaction()
        for k in keys:
            t.produce(topic, b"txn-%d" % k, b"key-%d" % k, on_delivery=_acked(out))
        assert t.flush(30) == 0
        end(30)
    # segment.ms has passed: the next append rolls the segment holding the workload, so all
    # of it is below the active segment (cleanable)
    time.sleep(SEGMENT_MS / 1000 + 0.5)
    p.produce(topic, b"roll", b"roll", on_delivery=cb)
    assert p.flush(30) == 0
    return sorted(plain + committed), aborted


def log_dir_size(bootstrap: str, topic: str) -> int:
    """The partition's size as kafka-log-dirs.sh --describe reports it."""
    out = _run([os.path.join(anchor_dir(), "bin", "kafka-log-dirs.sh"),
                "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic])
    line = next(ln for ln in out.splitlines() if ln.startswith("{"))
    sizes = [p["size"] for b in json.loads(line)["brokers"] for d in b["logDirs"]
             for p in d["partitions"] if p["partition"] == f"{topic}-0"]
    assert len(sizes) == 1, line
    return sizes[0]


def cleaned_topic(broker) -> dict:
    bootstrap = broker.bootstrap
    topic = "compact-clients-" + uuid.uuid4().hex[:8]
    create_topic(bootstrap, topic, TOPIC)
    live, aborted = produce(bootstrap, topic)
    latest: dict[bytes, Rec] = {}
    for rec in live:
        latest[rec[1]] = rec
    expected = sorted(latest.values())
    tools = unavailable_reason() is None  # Kafka's tools need the anchor and Java
    size_before = log_dir_size(bootstrap, topic) if tools else None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    deadline = time.monotonic() + 60
    got = read_all(bootstrap, topic)
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        got = read_all(bootstrap, topic)
    assert got == expected, "the cleaner did not leave the latest value per key in 60 s"
    time.sleep(1.5)  # file.delete.delay.ms: the replaced segments leave the disk
    return {"broker": broker, "topic": topic, "expected": expected, "live": live,
            "aborted": aborted, "size_before": size_before,
            "size_after": log_dir_size(bootstrap, topic) if tools else None}


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def cleaned(request, tmp_path_factory):
    lite = request.param == "kafkalite"
    if not lite and unavailable_reason() is not None:
        pytest.skip(unavailable_reason())
    broker = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("lite")), settings=BROKER) \
        if lite else RealKafka(settings=BROKER)
    with broker:
        yield cleaned_topic(broker)


@pytest.mark.parametrize("client", kclients.CLIENTS)
def test_client_reads_latest_value_per_key(cleaned, client):
    expected = cleaned["expected"]
    got = kclients.consume(client, cleaned["broker"].bootstrap, cleaned["topic"],
                           {0: len(expected)}, timeout=60)[0]
    rows = [(offset, key, value) for _p, offset, key, value, *_ in got]
    assert rows == expected  # the latest per key, tombstones included, in offset order
    offsets = [r[0] for r in rows]
    assert offsets == sorted(set(offsets))
    assert offsets[-1] + 1 - offsets[0] > len(rows)  # the read crossed the cleaner's gaps
    assert not {r[2] for r in rows} & {r[2] for r in cleaned["aborted"]}
    # tombstones stay (inside delete.retention.ms) unless the committed transaction wrote
    # the key again
    assert sum(r[2] is None for r in rows) == len(set(DELETED) - set(COMMITTED))


def test_log_dirs_size_falls(cleaned):
    if cleaned["size_before"] is None:
        pytest.skip(unavailable_reason() or "no kafka-log-dirs.sh")
    # KEYS x ROUNDS records went in, about KEYS stay
    assert 0 < cleaned["size_after"] < cleaned["size_before"] / 2, cleaned


def _partition_dir(cleaned: dict) -> str:
    found = glob.glob(os.path.join(cleaned["broker"].data_dir, "**", cleaned["topic"] + "-0"),
                      recursive=True)
    assert len(found) == 1, found
    return found[0]


def _run(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                         env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m",
                              "LOG_DIR": os.environ.get("TMPDIR", "/tmp")})
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _dump(*args: str) -> str:
    return _run([sys.executable, "-m", "kafkalite", "dump-log", *args])


def test_dump_log_shows_cleaned_segments(cleaned):
    part = _partition_dir(cleaned)
    rows = [json.loads(ln) for ln in _dump(part, "--summary", "--json").splitlines()]
    assert [r["base_offset"] for r in rows] == sorted(r["base_offset"] for r in rows)
    # the cleaned segments hold fewer records than their offset range: the cleaner's gaps
    assert sum(r["missing_offsets"] for r in rows) > 0
    assert all(r["invalid_bytes"] == 0 for r in rows)
    if cleaned["size_after"] is not None:  # the same bytes DescribeLogDirs counts
        assert sum(r["size"] for r in rows) == cleaned["size_after"]
    # the text dump's data records are what the clients read
    text = _dump(part, "--max-value-chars", "0")
    offsets = [int(ln.split()[2]) for ln in text.splitlines()
               if ln.startswith("| offset:") and "endTxnMarker" not in ln]
    assert offsets == [r[0] for r in cleaned["expected"]]
    summary = text.splitlines()[-1]  # the last segment's (the active one's) closing line
    assert summary.endswith(f"{rows[-1]['size']} bytes")


def test_dump_log_batch_lines_are_kafkas(cleaned):
    """On either broker's cleaned files, kafka-dump-log.sh and kafkalite dump-log print the
    same batch lines (delete horizons of kept tombstones included)."""
    if cleaned["size_after"] is None:
        pytest.skip(unavailable_reason() or "no kafka-dump-log.sh")
    part = _partition_dir(cleaned)
    logs = sorted(glob.glob(os.path.join(part, "*.log")))
    tool = os.path.join(anchor_dir(), "bin", "kafka-dump-log.sh")
    batch = lambda text: [ln for ln in text.splitlines()  # noqa: E731
                          if ln.startswith("baseOffset:")]
    horizons = 0
    for log in logs:
        theirs = batch(_run([tool, "--files", log]))
        assert theirs and batch(_dump(log, "--batches-only")) == theirs
        horizons += sum("deleteHorizonMs: OptionalLong[" in ln for ln in theirs)
    assert horizons  # the batches holding the kept tombstones
