# Crash consistency under SIGKILL (benchmarks/reliability/crash.py), in both durability
# modes: nothing acknowledged is lost or duplicated, order holds, log end offsets and
# committed offsets never go back, and the broker answers again after every restart.
from __future__ import annotations

import pytest

from benchmarks.reliability import crash


def _check(r: dict, cycles: int) -> None:
    assert r["violations"] == []
    assert r["cycles"] == cycles
    for topic in ("data", "churn"):
        t = r[topic]
        assert t["lost"] == 0 and t["duplicates"] == 0 and t["reorders"] == 0, t
        assert t["unsettled"] == 0, t
        assert t["acked"] == t["verified"] + t["expired_by_retention"], t
    assert r["data"]["acked"] > 1000, r["data"]  # the load really ran
    assert r["churn"]["expired_by_retention"] > 0, r["churn"]  # retention really deleted
    assert r["committed_offset_rewinds"] == 0
    assert r["commits_acknowledged"] > 0
    assert r["producer_fatal_errors"] == 0
    assert r["recovered_starts"] == cycles  # every restart after SIGKILL took recovery


@pytest.mark.parametrize("fsync", [False, True], ids=["page-cache", "fsync-before-ack"])
def test_sigkill_cycles(fsync: bool) -> None:
    cycles = 8  # two of each kill moment: random, roll, retention, commit
    _check(crash.run(cycles, fsync, seed=7, start_timeout=30.0), cycles)


@pytest.mark.long
@pytest.mark.parametrize("fsync", [False, True], ids=["page-cache", "fsync-before-ack"])
def test_sigkill_cycles_long(fsync: bool) -> None:
    _check(crash.run(200, fsync, seed=11, start_timeout=30.0), 200)
