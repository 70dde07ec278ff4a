# Truncation of a partition's log (Kafka's truncateTo / truncateFullyAndStartAt): a log
# cut at offset X must be exactly the log that only ever received the batches below X
# (segment, index, time index and .txnindex files, leader epochs, reads, timestamp
# lookups), also after a reopen and after a crash that left the flusher's work undone; the
# log cleaner neither swaps in a cleaning of what was truncated nor trusts its checkpoint.
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kafkalite.clock import FakeClock
from kafkalite.coordinator.producer_state import CHECK_INTERVAL, EXPIRATION, ProducerStates
from kafkalite.coordinator.producers import PartitionProducers
from kafkalite.log import leader_epoch
from kafkalite.log.cleaner import CleanerSettings, LogCleaner
from kafkalite.log.errors import OffsetOutOfRange
from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.log.retention import START_CHECKPOINT
from kafkalite.wire.batch_builder import build_batch as build_txn_batch, build_marker
from kafkalite.wire.records import TRANSACTIONAL_BIT, parse_header

from tests.helpers.kbatch import build_batch, simple_batch

T0 = 1_700_000_000_000
CFG = dict(segment_bytes=700, index_interval_bytes=150)


def batches() -> list[tuple[bytes, int]]:
    """(batch, leader epoch) in append order: plain batches, an aborted transaction (data
    at 9, ABORT marker at 10), a committed one, epochs 2, 3, 4."""
    out = []
    for i in range(12):
        epoch = 2 + i // 5
        if i in (3, 7):
            out.append((build_txn_batch([(b"k", b"txn%d" % i)], T0 + 10 * i, producer_id=77,
                                        producer_epoch=1, attributes=TRANSACTIONAL_BIT),
                        epoch))
            out.append((build_marker(77, 1, i == 7, 4, T0 + 10 * i + 1), epoch))
        else:
            out.append((simple_batch(3, ts=T0 + 10 * i, size=40), epoch))
    return out


def build(path, upto: int | None = None, flusher=None) -> PartitionLog:
    """The log of batches() appended as a leader does, those starting below `upto` only."""
    p = PartitionLog(str(path), "t", 0, LogConfig(**CFG), flusher=flusher)
    state = PartitionProducers()
    p.producer_state = state
    for batch, epoch in batches():
        if upto is not None and p.log_end_offset >= upto:
            break
        h = parse_header(batch)
        off = p.append(batch, h, T0, leader_epoch=epoch)
        if h.producer_id < 0:
            continue
        if h.records_count and not h.attributes & 0x20:
            state.update(77, 1, -1, 0, off, h.max_timestamp)
            state.begin(77, off)
        else:
            done = state.end(77, 1, 4, off, h.max_timestamp)
            if done is not None and off == 10:  # the first transaction's ABORT
                p.append_aborted(77, done[0], off, done[1])
    return p


def files(path) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(path)):
        if name.split(".")[-1] in ("log", "index", "timeindex", "txnindex"):
            data = open(os.path.join(path, name), "rb").read()
            if data or not name.endswith(".txnindex"):  # an emptied .txnindex stays, as Kafka's
                out[name] = data
    return out


def observed(p: PartitionLog) -> dict:
    """What a reader sees of the log."""
    ts = [T0 - 1] + [T0 + 10 * i + d for i in range(12) for d in (0, 2)] + [T0 + 999]
    return {"range": (p.log_start_offset, p.log_end_offset, p.high_watermark),
            "epochs": p.epochs.entries,
            "data": [bytes(p.read(o, 1 << 20)) for o in range(p.log_start_offset,
                                                               p.log_end_offset)],
            "by_time": [p.offset_for_timestamp(t) for t in ts],
            "max_time": p.max_timestamp_offset(),
            "aborted": p.collect_aborted(0, p.log_end_offset),
            "segments": [s.base_offset for s in p.segments]}


def assert_same(p: PartitionLog, ref: PartitionLog, pdir, rdir) -> None:
    assert observed(p) == observed(ref)
    p.flush()
    ref.flush()
    with open(os.path.join(pdir, leader_epoch.NAME)) as f, \
            open(os.path.join(rdir, leader_epoch.NAME)) as g:
        assert f.read() == g.read()


# 3: mid-segment; 9 inside the aborted transaction, before its marker; 11 just after it; a
# segment base (boundary); 20 across several segments into epoch 3; 28 the start of epoch
# 4; 31 the last batch.
@pytest.mark.parametrize("cut", [3, 9, 11, "boundary", 20, 28, 31])
def test_truncate_to_gives_exactly_the_shorter_log(tmp_path, cut):
    full = build(tmp_path / "full")
    if cut == "boundary":
        cut = full.segments[2].base_offset
    truncated_at = []
    full.on_truncate = lambda p, offset: truncated_at.append((p, offset))
    full.truncate_to(cut)
    assert truncated_at == [(full, cut)]
    ref = build(tmp_path / "ref", upto=cut)
    assert full.log_end_offset == ref.log_end_offset == cut  # batches() starts one at each
    assert_same(full, ref, tmp_path / "full", tmp_path / "ref")
    # Appends go on as in a log that never had the removed batches.
    for batch, _epoch in batches()[:4]:
        h = parse_header(batch)
        if h.producer_id < 0:
            full.append(batch, h, T0, leader_epoch=9)
            ref.append(batch, h, T0, leader_epoch=9)
    assert_same(full, ref, tmp_path / "full", tmp_path / "ref")
    full.close()
    ref.close()
    assert files(tmp_path / "full") == files(tmp_path / "ref")
    reopened = PartitionLog(str(tmp_path / "full"), "t", 0, LogConfig(**CFG))
    ref = PartitionLog(str(tmp_path / "ref"), "t", 0, LogConfig(**CFG))
    assert observed(reopened) == observed(ref)
    reopened.close()
    ref.close()


def test_truncate_to_the_log_start_empties_the_log(tmp_path):
    p = build(tmp_path)
    p.truncate_to(0)
    assert (p.log_start_offset, p.log_end_offset, p.size) == (0, 0, 0)
    assert [s.base_offset for s in p.segments] == [0]
    assert p.epochs.entries == []  # no epoch is known to have written anything
    assert p.read(0, 1 << 20) == b"" and p.offset_for_timestamp(T0) is None
    assert p.collect_aborted(0, 100) == []
    p.close()


@pytest.mark.parametrize("inside", [15, 16])
def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path, inside):
    """Offsets 14-16 are one batch, the first of epoch 3: truncating inside it is
    truncating at 14, as Kafka's segments do (the replication protocol truncates at batch
    boundaries: epoch ends, high watermarks)."""
    p = build(tmp_path / "p")
    seen = []
    p.on_truncate = lambda log, end: seen.append(end)
    p.truncate_to(inside)
    assert seen == [14]
    ref = build(tmp_path / "ref", upto=14)
    assert observed(p) == observed(ref)
    assert p.epochs.entries == [(2, 0)]
    p.close()
    ref.close()


def test_truncate_at_or_past_the_end_changes_nothing(tmp_path):
    p = build(tmp_path)
    before = observed(p)
    calls = []
    p.on_truncate = lambda *a: calls.append(a)
    p.truncate_to(p.log_end_offset)
    p.truncate_to(p.log_end_offset + 5)
    assert observed(p) == before and calls == []
    p.close()


@pytest.mark.parametrize("cut", [6, 20])
def test_a_crash_right_after_truncation_does_not_bring_batches_back(tmp_path, cut):
    """The flusher's queued work (fsyncs, the recovery point, checkpoints) never ran: a
    recovering reopen still finds exactly the truncated log."""
    gate = threading.Event()
    flusher = ThreadPoolExecutor(max_workers=1)
    try:
        p = build(tmp_path / "full", flusher=flusher)
        assert len(p.segments) > 3
        p.flush()
        flusher.submit(gate.wait, 30)  # from here on, nothing queued runs
        p.truncate_to(cut)
        crashed = PartitionLog(str(tmp_path / "full"), "t", 0, LogConfig(**CFG), recover=True)
        ref = build(tmp_path / "ref", upto=cut)
        assert observed(crashed) == observed(ref)
        assert not [n for n in os.listdir(tmp_path / "full") if n.endswith(".deleted")]
    finally:
        gate.set()
        flusher.shutdown(wait=True)
    crashed.close()
    ref.close()


def test_recovery_point_drops_to_the_truncation(tmp_path):
    p = build(tmp_path)
    p.flush()  # the rolls' recovery point is written
    rolled_to = int((tmp_path / "recovery-point").read_text())
    assert rolled_to == p.active.base_offset
    p.truncate_to(p.segments[1].base_offset + 1)
    p.flush()
    assert int((tmp_path / "recovery-point").read_text()) == p.segments[1].base_offset
    p.close()


def test_truncation_clamps_the_high_watermark(tmp_path):
    p = build(tmp_path)
    p.replicated = True
    p.update_high_watermark(25)
    p.truncate_to(14)
    assert p.high_watermark == 14
    assert p.last_stable_offset <= p.high_watermark
    p.close()


def test_truncate_fully_and_start_at(tmp_path):
    p = build(tmp_path)
    p.replicated = True
    p.update_high_watermark(20)
    seen = []
    p.on_truncate = lambda log, offset: seen.append(offset)
    p.truncate_fully_and_start_at(100)
    assert seen == [100]
    assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (100, 100, 100)
    assert [s.base_offset for s in p.segments] == [100]
    assert p.epochs.entries == []
    with pytest.raises(OffsetOutOfRange):
        p.read(20, 1 << 20)
    assert p.read(100, 1 << 20) == b""
    batch = simple_batch(2, ts=T0)
    assert p.append(batch, parse_header(batch), T0, leader_epoch=7) == 100
    assert p.epochs.entries == [(7, 100)]
    p.flush()
    assert (tmp_path / START_CHECKPOINT).read_text() == "100"
    p.close()
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".log")) == \
        [f"{100:020d}.log"]
    again = PartitionLog(str(tmp_path), "t", 0, LogConfig(**CFG), recover=True)
    assert (again.log_start_offset, again.log_end_offset) == (100, 102)
    assert again.epochs.entries == [(7, 100)]
    again.close()


def test_truncate_below_the_log_start_restarts_the_log_there(tmp_path):
    p = build(tmp_path)
    p.delete_records(p.segments[2].base_offset)
    start = p.log_start_offset
    p.truncate_to(start - 1)
    assert (p.log_start_offset, p.log_end_offset) == (start - 1, start - 1)
    p.close()


def put_rounds(p: PartitionLog, rounds: range) -> None:
    for rnd in rounds:
        for k in range(10):
            batch = build_batch([(b"k%d" % k, b"v%d-%d" % (k, rnd), [], T0)])
            p.append(batch, parse_header(batch), T0)


def compacted(tmp_path, rounds: int) -> tuple[PartitionLog, LogCleaner]:
    """A compacted log of `rounds` values of 10 keys, and a cleaner of it."""
    p = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(
        segment_bytes=600, cleanup_policy="compact", min_cleanable_ratio=0.01))
    put_rounds(p, range(rounds))
    return p, LogCleaner(str(tmp_path), lambda: [p], CleanerSettings(),
                         FakeClock(wall_start_ms=T0 + 1000))


def test_truncation_makes_the_cleaner_clean_again_from_there(tmp_path):
    p, c = compacted(tmp_path, 3)
    plan = c.clean_once(T0 + 1000)
    cleaned_to = c.checkpoints[("t", 0)]
    assert plan is not None and cleaned_to > 12
    p.truncate_to(12)
    end = p.log_end_offset  # 12, or the base of the cleaned batch holding it
    assert end <= 12
    put_rounds(p, range(3, 8))  # other values at the removed offsets, and more
    assert p.active.base_offset > cleaned_to
    assert c.plan(p, T0 + 1000).first_dirty == end
    p.close()


def test_a_cleaning_the_log_was_truncated_under_is_abandoned(tmp_path):
    p, c = compacted(tmp_path, 4)
    plan = c.grab(T0 + 1000)
    assert plan is not None
    p.truncate_to(p.segments[2].base_offset)
    before = observed(p)
    c._clean(plan, T0 + 1000, c._apply)
    assert observed(p) == before
    assert c.uncleanable() == [] and ("t", 0) not in c.checkpoints
    assert not [n for n in os.listdir(tmp_path / "t-0") if ".swap" in n or ".cleaned" in n]
    p.close()


def test_on_truncate_rebuilds_the_producer_state_as_documented(tmp_path):
    """What the broker's hook does (ProducerStates.load): cut between the aborted
    transaction's data (9) and its marker (10), the transaction is open again, the LSO is
    back at its first offset, and the snapshot past the new end is gone."""
    states = ProducerStates({EXPIRATION: 86_400_000, CHECK_INTERVAL: 600_000},
                            FakeClock(wall_start_ms=T0))
    p = build(tmp_path)
    states.load(p)
    states._snapshot_in_background(p)  # a snapshot at the log end, as at a roll
    states.writer.drain()
    assert any(n.endswith(".snapshot") and int(n.split(".")[0]) > 10
               for n in os.listdir(tmp_path))
    assert p.last_stable_offset == p.log_end_offset
    p.on_truncate = lambda log, end: states.load(log)
    p.truncate_to(10)
    assert p.producer_state.first_unstable == 9
    assert p.last_stable_offset == 9
    assert p.collect_aborted(0, 10) == []
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".snapshot")
                and int(n.split(".")[0]) > 10]
    states.writer.close()
    p.close()
