# Limits and load (benchmarks/reliability/limits.py and disk.py).
from __future__ import annotations

import pytest

from benchmarks.reliability import disk, limits


def test_connection_limits_refuse_extra_connections_only() -> None:
    r = limits.connection_limits(per_ip=4, total=7)
    assert r["admitted_same_ip"] == 4
    assert r["extra_same_ip_answered"] is False      # max.connections.per.ip
    assert r["admitted_other_ip"] == 3
    assert r["over_total_answered"] is False         # max.connections
    assert r["existing_still_answer"] == 7           # admitted connections unaffected
    assert r["slot_reused_after_close"] is True
    assert r["refusals_logged"] == 2


def test_slow_reader_cannot_make_the_broker_buffer_without_bound() -> None:
    r = limits.slow_reader(requests=400, megabytes=24, seconds=8.0)
    assert r["broker_alive"] and r["other_client_served"]
    # 400 pipelined ~1 MB Fetch responses would be ~400 MB if buffered.
    assert r["rss_mb_max"] < r["rss_mb_before"] + 64, r


def _check_load(r: dict) -> None:
    assert r["broker_alive"]
    assert r["error_codes"] == {} and r["connection_errors"] == 0, r
    assert r["partitions_with_leo_mismatch"] == 0
    assert r["records_acked"] > 0
    assert r["rss_mb_max"] < r["rss_mb_before"] + 400, r


def test_concurrent_connections_on_many_partitions() -> None:
    _check_load(limits.concurrent_load(connections=200, partitions=400, seconds=30.0))


@pytest.mark.long
def test_concurrent_connections_on_many_partitions_long() -> None:
    r = limits.concurrent_load(connections=1000, partitions=2000, seconds=300.0)
    assert r["broker_fd_limit"] >= 1000 + 2000 * 3  # sockets + segment/index fds
    _check_load(r)


def test_full_disk_answers_storage_error_and_recovers() -> None:
    r = disk.run(size_kb=1024)
    if "skipped" in r:
        pytest.skip(r["skipped"])
    assert r["storage_error_seen"], r
    assert r["acked_before_full"] > 0
    assert set(r["codes_while_full"]) == {disk.STORAGE_ERROR}
    assert r["answers_while_full"]
    assert r["problems_while_full"] == []
    assert r["codes_after_space_returns"] == {0: 20}
    assert r["problems_after_space_returns"] == [] and r["problems_after_restart"] == []
    assert r["unexpected_errors_logged"] == 0
