# Replication of a compacted log: the leader's cleaner removed whole batches, so a
# follower's fetches from its log end get batches above it (Kafka's follower appends them
# as they are: UnifiedLog.append without offset assignment refuses only offsets below the
# log end or out of order). Real segment files and the real log cleaner, in tmp dirs.
from __future__ import annotations

import pytest

from kafkalite.clock import FakeClock
from kafkalite.coordinator.producers import PartitionProducers
from kafkalite.log.cleaner import CleanerSettings, LogCleaner
from kafkalite.log.errors import UnexpectedAppendOffset
from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.wire.records import parse_header, validate_produce_batch

from tests.helpers.kbatch import build_batch, decode_records

T0 = 1_700_000_000_000
PID = 9
KEYS = 6


def open_log(path) -> PartitionLog:
    return PartitionLog(str(path), "t", 0, LogConfig(
        segment_bytes=500, index_interval_bytes=100, cleanup_policy="compact",
        min_cleanable_ratio=0.01))


def batches(data) -> list[tuple[int, int, int, bytes]]:
    """(base offset, last offset, leader epoch, bytes) of each whole batch in `data`."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        h = parse_header(data, pos)
        if pos + h.size > len(data):
            break
        out.append((h.base_offset, h.last_offset, h.partition_leader_epoch,
                    bytes(data[pos:pos + h.size])))
        pos += h.size
    return out


def all_batches(p: PartitionLog) -> list[tuple[int, int, int, bytes]]:
    out: list = []
    offset = p.log_start_offset
    while offset < p.log_end_offset:
        got = batches(p.read(offset, 1 << 20))
        if not got:
            break
        out += got
        offset = got[-1][1] + 1
    return out


def records(p: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    return [(o, k, v) for _b, _l, _e, data in all_batches(p)
            for o, _ts, k, v, _h in decode_records(data)]


def overwrite(p: PartitionLog, state: PartitionProducers, rounds: int, epoch: int,
              start: int = 0) -> None:
    """`rounds` rounds of one idempotent batch per key (producer PID), its leader's
    appends at `epoch` with the producer state the broker keeps."""
    seq = start * KEYS
    for rnd in range(start, start + rounds):
        for k in range(KEYS):
            batch = build_batch([(b"k%d" % k, b"v%d-%d" % (k, rnd), [], T0 + rnd)],
                                producer_id=PID, producer_epoch=0, base_sequence=seq)
            off = p.append(batch, validate_produce_batch(batch, 1 << 20), T0 + rnd,
                           leader_epoch=epoch)
            state.update(PID, 0, seq, 0, off, T0 + rnd)
            seq += 1


def clean(p: PartitionLog, tmp_path, name: str) -> None:
    c = LogCleaner(str(tmp_path / name), lambda: [p], CleanerSettings(),
                   FakeClock(wall_start_ms=T0 + 1000))
    assert c.clean_once(T0 + 1000) is not None


def replicate(leader: PartitionLog, follower: PartitionLog, fetch_bytes: int) -> list[int]:
    """Fetch from the follower's log end until it reaches the leader's, as the replica
    fetcher does; returns the offset each fetch asked for whose first batch started above
    it (a gap)."""
    gaps = []
    for _ in range(1000):
        if follower.log_end_offset >= leader.log_end_offset:
            return gaps
        asked = follower.log_end_offset
        headers = follower.append_replica(leader.read(asked, fetch_bytes))
        if headers and headers[0].base_offset > asked:
            gaps.append(asked)
    raise AssertionError("replication did not finish")


def leader_compacted(tmp_path) -> tuple[PartitionLog, PartitionProducers]:
    leader = open_log(tmp_path / "leader")
    state = PartitionProducers()
    leader.producer_state = state
    overwrite(leader, state, 4, epoch=3)
    overwrite(leader, state, 3, epoch=5, start=4)
    before = len(records(leader))
    clean(leader, tmp_path, "leader")
    assert len(records(leader)) < before
    return leader, state


@pytest.mark.parametrize("fetch_bytes", [1 << 20, 300])
def test_a_compacted_leaders_batches_replicate_to_an_empty_follower(tmp_path, fetch_bytes):
    leader, theirs = leader_compacted(tmp_path)
    follower = open_log(tmp_path / "follower")
    mine = PartitionProducers()
    follower.producer_state = mine
    gaps = replicate(leader, follower, fetch_bytes)
    assert gaps  # some fetch began in a range the cleaner emptied
    assert follower.log_end_offset == leader.log_end_offset == all_batches(leader)[-1][1] + 1
    assert all_batches(follower) == all_batches(leader)  # identical bytes and offsets
    # the follower's epochs start at its batches' (the leader's where the cleaner left
    # the first batch of an epoch)
    kept = all_batches(leader)
    assert follower.epochs.entries[-2:] == [
        (e, min(b for b, _l, e2, _d in kept if e2 == e)) for e in (3, 5)]
    for base, _last, epoch, _data in all_batches(follower):
        assert follower.epochs.epoch_for_offset(base) == epoch
    assert mine.producers[PID].last_batch() == theirs.producers[PID].last_batch()
    assert mine.producers[PID].last_seq == 7 * KEYS - 1
    follower.close()
    again = open_log(tmp_path / "follower")
    assert again.log_end_offset == leader.log_end_offset
    assert all_batches(again) == all_batches(leader)
    assert again.epochs.entries == follower.epochs.entries
    again.close()
    leader.close()


def test_a_batch_below_the_log_end_is_still_refused_after_a_gap(tmp_path):
    leader, _ = leader_compacted(tmp_path)
    follower = open_log(tmp_path / "follower")
    replicate(leader, follower, 1 << 20)
    end = follower.log_end_offset
    with pytest.raises(UnexpectedAppendOffset, match="overlaps"):
        follower.append_replica(leader.read(0, 1 << 20))
    assert follower.log_end_offset == end
    follower.close()
    leader.close()


def test_the_followers_own_cleaner_compacts_its_replica(tmp_path):
    """The follower of a compacted leader takes newer overwrites and cleans them itself, as
    Kafka cleans each replica on its own: once both have cleaned, both hold the same
    records of the latest value per key, at the leader's offsets, and the follower keeps
    following."""
    leader, state = leader_compacted(tmp_path)
    follower = open_log(tmp_path / "follower")
    follower.producer_state = PartitionProducers()
    replicate(leader, follower, 400)
    overwrite(leader, state, 3, epoch=6, start=7)
    replicate(leader, follower, 400)
    before = records(follower)
    clean(follower, tmp_path, "follower")
    assert len(records(follower)) < len(before)
    assert follower.log_end_offset == leader.log_end_offset
    assert set(records(follower)) <= set(before)  # offsets kept
    clean(leader, tmp_path, "leader")
    latest = {k: (o, v) for o, k, v in before}
    for p in (leader, follower):
        assert {k: (o, v) for o, k, v in records(p)} == latest
    overwrite(leader, state, 1, epoch=6, start=10)
    replicate(leader, follower, 400)
    latest = {k: (o, v) for o, k, v in records(leader)}
    assert {k: (o, v) for o, k, v in records(follower)} == latest
    follower.close()
    leader.close()
