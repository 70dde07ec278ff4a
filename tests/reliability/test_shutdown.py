# Graceful shutdown under load (benchmarks/reliability/shutdown.py): SIGTERM while 50
# idempotent producers write; every acknowledged record is readable after the restart, and
# the restart takes the clean-shutdown path.
from __future__ import annotations

import pytest

from benchmarks.reliability import shutdown


def _check(r: dict, rounds: int) -> None:
    assert r["rounds"] == rounds
    assert r["exit_codes"] == [0] * rounds
    assert r["start_paths"] == [["clean"]] * rounds
    assert r["recovery_scans"] == 0
    assert r["violations"] == []
    m = r["model"]
    assert m["lost"] == 0 and m["duplicates"] == 0 and m["reorders"] == 0 and m["unsettled"] == 0
    assert m["acked"] == m["verified"] > 0
    assert r["producer_fatal_errors"] == 0 and r["unflushed_at_end"] == 0


def test_sigterm_under_load_50_clients() -> None:
    _check(shutdown.run(clients=50, rounds=2, seed=3), 2)


@pytest.mark.long
def test_sigterm_under_load_50_clients_long() -> None:
    _check(shutdown.run(clients=50, rounds=20, seed=9), 20)
