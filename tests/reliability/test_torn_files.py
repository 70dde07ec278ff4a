# Torn and corrupt files (benchmarks/reliability/torn.py): after each kind of damage to a
# stopped broker's files, it recovers to the last valid batch, rebuilds indexes, keeps its
# producer state, never serves a corrupt batch, and logs the bytes it dropped.
from __future__ import annotations

import pytest

from benchmarks.reliability import torn


def _check(r: dict, cases: int) -> None:
    assert r["cases"] == cases
    assert r["failures"] == [], r["failures"][:3]
    kinds = set(r["by_kind"])
    assert {f"unclean/{k}" for k in torn.KINDS_UNCLEAN} <= kinds
    assert {f"clean/{k}" for k in torn.KINDS_CLEAN} <= kinds


def test_torn_and_corrupt_files() -> None:
    cases = 2 * max(len(torn.KINDS_UNCLEAN), len(torn.KINDS_CLEAN))  # every kind at least once
    _check(torn.run(cases, seed=3), cases)


@pytest.mark.long
def test_torn_and_corrupt_files_long() -> None:
    _check(torn.run(400, seed=17), 400)
