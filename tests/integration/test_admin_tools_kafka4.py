# Kafka's own tools (from the 3.8.0 anchor) against kafkalite and against the real Kafka: the
# outputs match once the fields that legitimately differ are normalised (ports, the log
# directory, sizes, the cluster id, the metadata log's high watermark). Skips where the
# anchor or Java is missing, as the real_kafka fixture does.
from __future__ import annotations

import json
import os
import re
import subprocess
import uuid

import pytest

from tests.helpers.real_kafka import anchor_dir, create_topic, eventually

TOOL_TIMEOUT_S = 90


def run_tool(bootstrap: str, tool: str, *args: str) -> str:
    cmd = [os.path.join(anchor_dir(), "bin", tool), "--bootstrap-server", bootstrap, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                         env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"})
    return (out.stdout + out.stderr).replace(bootstrap, "BOOTSTRAP")


def _log_dirs(text: str, topic: str) -> list:
    """kafka-log-dirs.sh prints one JSON line: keep this topic's partitions, without paths
    and sizes."""
    line = next(ln for ln in text.splitlines() if ln.startswith("{"))
    doc = json.loads(line)
    return [(b["broker"], d["error"], sorted((p["partition"], p["offsetLag"], p["isFuture"])
                                             for p in d["partitions"]))
            for b in doc["brokers"] for d in b["logDirs"]]


def _quorum(text: str) -> str:
    text = re.sub(r"(ClusterId:\s+)\S+", r"\1ID", text)
    text = re.sub(r"(HighWatermark:\s+)\d+", r"\1N", text)
    return text


def _replication(text: str) -> list:
    """The header, then each replica's id, lag and status (offsets and times differ)."""
    rows = [ln.split() for ln in text.splitlines() if ln.strip()]
    return [rows[0]] + [[r[0], r[2], r[-1]] for r in rows[1:]]


@pytest.fixture
def both(kafka_broker, real_kafka):
    return {"kafkalite": kafka_broker, "kafka": real_kafka}


def test_tools_match(both):
    topic = f"k4tool-{uuid.uuid4().hex[:8]}"
    out = {}
    for who, bs in both.items():
        create_topic(bs, topic, partitions=2)
        eventually(lambda: _log_dirs(run_tool(bs, "kafka-log-dirs.sh", "--describe",
                                              "--topic-list", topic), topic),
                   lambda d: d and len(d[0][2]) == 2, timeout=30, interval=1)
        out[who] = {
            "log-dirs": _log_dirs(run_tool(bs, "kafka-log-dirs.sh", "--describe",
                                           "--topic-list", topic), topic),
            "election": run_tool(bs, "kafka-leader-election.sh", "--election-type",
                                 "preferred", "--topic", topic, "--partition", "0"),
            "election-all": run_tool(bs, "kafka-leader-election.sh", "--election-type",
                                     "preferred", "--all-topic-partitions"),
            "quorum": _quorum(run_tool(bs, "kafka-metadata-quorum.sh", "describe", "--status")),
            "replication": _replication(run_tool(bs, "kafka-metadata-quorum.sh", "describe",
                                                 "--replication")),
            "reassign": run_tool(bs, "kafka-reassign-partitions.sh", "--list"),
        }
    assert out["kafkalite"] == out["kafka"]
    assert out["kafka"]["log-dirs"][0][2] == [(f"{topic}-{i}", 0, False) for i in (0, 1)]
    assert "Valid replica already elected" in out["kafka"]["election"]
    assert "CurrentVoters" in out["kafka"]["quorum"]
