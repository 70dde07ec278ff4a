"""benchmarks/failover_time.py, bounded: one round of each mode (SIGKILL, SIGTERM of the
partition leader) on 3 kafkalite brokers alone with a 2 s ZooKeeper session; the run must
produce its figures and find every acknowledged record in the log (the side-by-side run
with Kafka is the benchmark itself; no time is asserted)."""
from __future__ import annotations

import json

import pytest

from benchmarks import failover_time
from tests.helpers.zookeeper import unavailable_reason

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(unavailable_reason() is not None,
                                 reason=str(unavailable_reason()))]


def test_one_round_fails_over_and_loses_nothing(tmp_path):
    assert failover_time.main(["--rounds", "1", "--session-ms", "2000", "--rate", "500",
                               "--no-kafka", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "failover_time-latest.json").read_text())
    lite = doc["clusters"]["kafkalite"]
    assert list(doc["clusters"]) == ["kafkalite"]
    assert [r["mode"] for r in lite["rounds"]] == ["kill", "term"]
    for r in lite["rounds"]:
        # the producer resumed on another broker, after the one it followed was signalled
        assert r["new_leader"] not in (r["leader"], -1, None)
        assert r["resume_s"] is not None and r["znode_s"] is not None
        assert r["acked"] == r["sent"] and r["error_count"] == 0
    assert lite["audit"]["read_complete"]
    assert lite["audit"]["lost"] == 0 and lite["audit"]["duplicated"] == 0
    assert lite["audit"]["log_records"] >= sum(r["acked"] for r in lite["rounds"])


def test_resume_is_the_end_of_the_longest_pause_after_the_signal():
    acks = [(t, b"", 0) for t in (0.0, 0.01, 0.5, 0.51, 0.52, 2.0, 2.01)]
    # the 0.49 s pause began before the signal at 0.45: only its 0.05 s after it count
    assert failover_time.resume_after(acks, 0.45) == 2.0 - 0.45
    assert failover_time.resume_after(acks, 0.005) == 2.0 - 0.005
    assert failover_time.resume_after(acks, 3.0) is None
