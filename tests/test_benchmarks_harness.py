# A small end-to-end check of the benchmark harness (benchmarks/) itself, not of broker
# speed: a spawned broker, tiny counts, every test kind, and the JSON it writes. The
# side-by-side run against the real Kafka (a JVM, about 40 s) runs with KAFKALITE_LONG=1.
from __future__ import annotations

import argparse
import json
import os

import pytest

from benchmarks import run
from benchmarks.broker_proc import probe_metadata, spawn_broker


def test_small_run_writes_complete_results(tmp_path):
    rc = run.main(["--spawn", "--messages", "20000", "--messages-large", "4000",
                   "--latency-seconds", "1", "--latency-rate", "200", "--startup-runs", "1",
                   "--sink-mib", "8", "--parallel-consumers", "2", "--phase-timeout", "60",
                   "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert doc["command"].startswith("python")
    assert [(r["size"], r["acks"]) for r in doc["produce"]] == \
        [(100, "1"), (100, "all"), (1024, "1"), (1024, "all")]
    for r in doc["produce"]:
        assert r["complete"] and r["acked"] == r["stored_per_high_watermarks"]
        assert r["broker"]["broker_cpu_s"] >= 0
    assert [(r["size"], r.get("processes", 1)) for r in doc["consume"]] == \
        [(100, 1), (100, 2), (1024, 1), (1024, 2)]
    assert all(r["complete"] for r in doc["consume"])
    assert doc["latency"]["received"] == doc["latency"]["sent"] == 200
    assert doc["startup"]["metadata_s_median"] > 0
    assert doc["broker_totals"]["broker_rss_mib_peak_vmhwm"] > 0
    assert {s["chunk_bytes"] for s in doc["tcp_sink"]} == {1024, 65536}
    assert not [w for w in doc["warnings"] if "acked but" in w]


def test_raw_metadata_probe_answers():
    bp, startup = spawn_broker()
    try:
        assert startup.metadata_s >= startup.listening_s > 0
        assert probe_metadata("127.0.0.1", bp.port)
    finally:
        bp.cleanup()


@pytest.mark.parametrize("addr", ["10.0.0.1:9092", "example.com:9092", "127.0.0.1:1,8.8.8.8:2"])
def test_only_loopback_targets(addr):
    with pytest.raises(argparse.ArgumentTypeError):
        run._loopback_only(addr)


def _reference_missing() -> str | None:
    from benchmarks.kafka_ref import unavailable_reason
    return unavailable_reason()


@pytest.mark.skipif(os.environ.get("KAFKALITE_LONG") != "1",
                    reason="side-by-side run with a JVM: set KAFKALITE_LONG=1")
@pytest.mark.skipif(_reference_missing() is not None,
                    reason=f"Apache Kafka reference unavailable: {_reference_missing()}")
def test_reference_kafka_side_by_side(tmp_path):
    """--reference kafka end to end with tiny counts: both brokers start, every figure is
    measured on each, the JVM (not serve.sh's shell) is the process accounted, and both are
    gone afterwards."""
    rc = run.main(["--spawn", "--reference", "kafka", "--sizes", "1024", "--acks", "all",
                   "--messages-large", "3000", "--latency-rate", "200", "--latency-seconds", "1",
                   "--sync-produce", "100", "--warmup-scale", "0.2", "--startup-runs", "0",
                   "--rounds", "2", "--phase-timeout", "60", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "latest.json").read_text())
    kl, ka = doc["targets"]["kafkalite"], doc["targets"]["kafka"]
    for t in (kl, ka):
        assert len(t["rounds"]) == 2 and t["warmup"]
        assert set(t["rounds"][0]) == {"produce 1024 B acks=all", "consume 1024 B",
                                       "consume 1024 B group", "latency", "sync produce"}
        assert all(r["complete"] for rnd in t["rounds"] for r in rnd.values())
        assert t["exit_code"] is not None
    assert not os.path.exists(f"/proc/{ka['pid']}") and not os.path.exists(f"/proc/{kl['pid']}")
    # a JVM with a 512 MiB heap is far above any Python process: the JVM was measured
    assert ka["rss_mib_vmhwm"] > 256
    rows = {r["figure"]: r for r in doc["comparison"]}
    row = rows["produce 1024 B acks=all"]
    assert row["better"] == "higher" and row["unit"] == "MiB/s"
    assert row["ratio"] == pytest.approx(row["kafkalite"] / row["kafka"], rel=1e-2)
    assert row["kafka_range"][0] <= row["kafka"] <= row["kafka_range"][1]
    assert rows["sync produce p99"]["better"] == "lower"
    assert rows["broker peak RSS (VmHWM)"]["kafka"] == ka["rss_mib_vmhwm"]


def test_reference_without_java_is_skipped_with_a_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no bin/java there
    rc = run.main(["--spawn", "--reference", "kafka", "--quick", "--out", str(tmp_path)])
    assert rc == 3
    assert "--reference kafka skipped: no java found" in capsys.readouterr().err
    assert not (tmp_path / "latest.json").exists()
