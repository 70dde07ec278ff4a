"""benchmarks/tls.py, bounded: kafkalite alone, 2,000 records, every phase complete over both
listeners (the side-by-side run with Kafka is the benchmark itself)."""
from __future__ import annotations

import json

import pytest

from benchmarks import tls

pytestmark = pytest.mark.timeout(180)


def test_small_tls_run_completes_over_both_listeners(tmp_path):
    out = tmp_path / "tls.json"
    assert tls.main(["--records", "2000", "--no-kafka", "--phase-timeout", "60",
                     "--json", str(out)]) == 0
    results = json.loads(out.read_text())["kafkalite"]
    assert sorted(results) == sorted(f"{p} {w}" for p in ("PLAINTEXT", "SSL")
                                     for w in ("produce acks=1", "produce acks=all", "consume"))
    assert all(r["complete"] for r in results.values())
    assert results["SSL consume"]["received"] == 2000
