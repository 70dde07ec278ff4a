# The log cleaner's timing rules on the fake clock (min.compaction.lag.ms holds young records
# back, max.compaction.lag.ms forces a cleaning below min.cleanable.dirty.ratio), and the
# rebuilt batches compressed again with their own codec (gzip, snappy, lz4, zstd), read
# back by kafka-python's decoder.
from __future__ import annotations

import pytest

from kafkalite.clock import FakeClock
from kafkalite.log.cleaner_records import DELETE_HORIZON_BIT
from kafkalite.wire.records import parse_header
from tests.helpers.kbatch import CODECS
from tests.unit.test_cleaner import T0, cleaner, open_log, put, read_all

MINUTE = 60_000


def latest(p) -> dict:
    out = {}
    for _o, k, v in read_all(p):
        out[k] = v
    return out


def keys_below_active(p) -> list[bytes]:
    return [k for o, k, _ in read_all(p) if o < p.active.base_offset]


def test_min_compaction_lag(tmp_path):
    clock = FakeClock(wall_start_ms=T0)
    p = open_log(tmp_path / "t-0", min_compaction_lag_ms=10 * MINUTE)
    for rnd in range(2):  # old records
        for k in range(6):
            put(p, [(b"k%d" % k, b"old-%d" % rnd)], ts=T0)
    young_from = p.log_end_offset
    for rnd in range(2):  # records 5 minutes younger
        for k in range(6):
            put(p, [(b"k%d" % k, b"young-%d" % rnd)], ts=T0 + 5 * MINUTE)
    p.roll()
    c, logs = cleaner(tmp_path, clock)
    logs.append(p)
    before = read_all(p)
    clock.step_wall(9 * MINUTE)  # nothing is 10 minutes old yet
    assert c.clean_once() is None and read_all(p) == before
    clock.step_wall(2 * MINUTE)  # the old records are past the lag, the young ones not
    plan = c.clean_once()
    assert plan is not None
    end = c.checkpoints[("t", 0)]
    assert end <= young_from  # the cleaning stopped at the first young segment
    after = read_all(p)
    assert [r for r in after if r[0] >= end] == [r for r in before if r[0] >= end]
    assert len([r for r in after if r[0] < end]) < len([r for r in before if r[0] < end])
    clock.step_wall(5 * MINUTE)  # now all of it is old enough
    assert c.clean_once() is not None
    assert sorted(keys_below_active(p)) == sorted(set(keys_below_active(p)))
    assert latest(p) == {b"k%d" % k: b"young-1" for k in range(6)}


def test_max_compaction_lag_forces_a_cleaning_below_the_dirty_ratio(tmp_path):
    clock = FakeClock(wall_start_ms=T0 + 1000)
    p = open_log(tmp_path / "t-0", min_cleanable_ratio=0.9, max_compaction_lag_ms=30 * MINUTE)
    for k in range(30):
        put(p, [(b"k%d" % k, b"v0-" + b"x" * 30)], ts=T0)
    c, logs = cleaner(tmp_path, clock)
    logs.append(p)
    assert c.clean_once() is not None  # all of it dirty: ratio 1.0
    for k in range(3):  # a little dirt: far below the 0.9 ratio
        put(p, [(b"k%d" % k, b"v1-" + b"x" * 30)], ts=T0 + 2000)
    p.roll()
    first_dirty = c.checkpoints[("t", 0)]
    clock.step_wall(20 * MINUTE)
    plan = c.plan(p, clock.wall_ms())
    assert plan is None
    clock.step_wall(11 * MINUTE)  # the oldest dirty record is past max.compaction.lag.ms
    plan = c.clean_once()
    assert plan is not None and plan.forced and plan.ratio < 0.9
    assert c.checkpoints[("t", 0)] > first_dirty
    assert [v for _o, k, v in read_all(p) if k == b"k0"] == [b"v1-" + b"x" * 30]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_rebuilt_batches_keep_their_codec(tmp_path, codec):
    n = CODECS[codec]
    p = open_log(tmp_path / "t-0", segment_bytes=1 << 20)
    # the first batch loses a, b (superseded) and keeps c and the tombstone d (which gets
    # a delete horizon): both rewrites compress again
    put(p, [(b"a", b"1" * 50), (b"b", b"1" * 50), (b"c", b"1" * 50), (b"d", None)], codec=n)
    put(p, [(b"a", b"2" * 50), (b"b", b"2" * 50)], codec=n)
    p.roll()
    c, logs = cleaner(tmp_path)
    logs.append(p)
    assert c.clean_once(T0 + 1000) is not None
    data = bytes(p.read(0, 1 << 20))
    pos, headers = 0, []
    while pos + 61 <= len(data):
        h = parse_header(data, pos)
        headers.append(h)
        pos += h.size
    first = headers[0]
    assert first.compression == n and first.records_count == 2
    assert first.attributes & DELETE_HORIZON_BIT
    assert [(o, k, v) for o, k, v in read_all(p)] == [
        (2, b"c", b"1" * 50), (3, b"d", None), (4, b"a", b"2" * 50), (5, b"b", b"2" * 50)]
    assert all(h.compression == n for h in headers)
