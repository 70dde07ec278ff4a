# The leader-epoch cache against Kafka's LeaderEpochFileCache semantics (assign, endOffsetFor,
# truncateFromEnd / truncateFromStart) and its checkpoint file's exact text, which a real
# Kafka 3.8 broker writes as "0\n1\n0 0\n" in a new partition's directory.
from __future__ import annotations

import pytest

from kafkalite.log.leader_epoch import (
    UNDEFINED, LeaderEpochCache, format_checkpoint, parse_checkpoint)


def cache(*entries, saved=None):
    return LeaderEpochCache(entries, persist=None if saved is None else saved.append)


def test_checkpoint_text_is_kafkas():
    assert format_checkpoint([(0, 0)]) == b"0\n1\n0 0\n"
    assert format_checkpoint([]) == b"0\n0\n"
    assert format_checkpoint([(2, 6), (5, 120)]) == b"0\n2\n2 6\n5 120\n"
    assert parse_checkpoint("0\n2\n2 6\n5 120\n") == [(2, 6), (5, 120)]


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\n2 6\n", "0\n1\n2\n", "0\nx\n"])
def test_malformed_checkpoint_is_refused(text):
    with pytest.raises(ValueError):
        parse_checkpoint(text)


def test_assign_persists_each_change_and_only_changes():
    saved: list[bytes] = []
    c = cache(saved=saved)
    assert c.assign(0, 0) and saved == [b"0\n1\n0 0\n"]
    assert not c.assign(0, 5)  # the same epoch later on: nothing new
    assert c.assign(3, 10) and saved[-1] == b"0\n2\n0 0\n3 10\n"
    assert len(saved) == 2 and c.latest_epoch == 3


def test_assign_drops_entries_it_contradicts():
    c = cache((2, 6), (3, 8))
    c.assign(4, 8)  # epoch 3 began at 8 and wrote nothing before epoch 4 took over
    assert c.entries == [(2, 6), (4, 8)]
    c = cache((2, 6), (3, 8))
    c.assign(1, 4)  # an older epoch at an older offset wipes both
    assert c.entries == [(1, 4)]
    c = cache((2, 6))
    c.assign(2, 4)  # the same epoch starting earlier replaces it
    assert c.entries == [(2, 4)]
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(1, -1)


def test_loading_through_assign_repairs_a_non_monotonic_file():
    assert cache((1, 0), (3, 10), (2, 12)).entries == [(1, 0), (2, 12)]


def test_end_offset_for():
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.end_offset_for(5, 42) == (5, 42)  # the latest epoch ends at the log end
    assert c.end_offset_for(3, 42) == (3, 20)
    assert c.end_offset_for(4, 42) == (3, 20)  # a gap: the epoch before, up to the next
    assert c.end_offset_for(2, 42) == (1, 10)
    assert c.end_offset_for(0, 42) == (0, 0)  # older than all: where the first one starts
    assert c.end_offset_for(6, 42) == (UNDEFINED, UNDEFINED)
    assert c.end_offset_for(UNDEFINED, 42) == (UNDEFINED, UNDEFINED)
    assert cache().end_offset_for(0, 42) == (UNDEFINED, UNDEFINED)


def test_epoch_for_offset():
    c = cache((1, 5), (3, 10))
    assert [c.epoch_for_offset(o) for o in (4, 5, 9, 10, 99)] == [UNDEFINED, 1, 1, 3, 3]


def test_truncate_from_end():
    saved: list[bytes] = []
    c = cache((2, 6), (3, 8), (4, 11), saved=saved)
    c.truncate_from_end(12)
    assert c.entries == [(2, 6), (3, 8), (4, 11)] and saved == []
    c.truncate_from_end(9)
    assert c.entries == [(2, 6), (3, 8)]
    c.truncate_from_end(8)
    assert c.entries == [(2, 6)] and saved[-1] == b"0\n1\n2 6\n"


def test_truncate_from_start():
    c = cache((2, 6), (3, 8), (4, 11))
    c.truncate_from_start(5)
    assert c.entries == [(2, 6), (3, 8), (4, 11)]
    c.truncate_from_start(9)  # epoch 3 was in force at 9: it now starts there
    assert c.entries == [(3, 9), (4, 11)]
    c.truncate_from_start(11)
    assert c.entries == [(4, 11)]
    saved: list[bytes] = []
    c = cache((0, 0), saved=saved)
    c.truncate_from_start(3)  # DeleteRecords to 3 on Kafka 3.8: "0\n1\n0 3\n"
    assert saved == [b"0\n1\n0 3\n"]
    c.truncate_from_start(3)
    assert len(saved) == 1


def test_clear():
    saved: list[bytes] = []
    c = cache((1, 0), saved=saved)
    c.clear()
    assert c.entries == [] and saved == [b"0\n0\n"] and c.latest_epoch == UNDEFINED


# --- in a partition's log ------------------------------------------------------------------

def _file(path) -> bytes:
    return (path / "leader-epoch-checkpoint").read_bytes()


def test_partition_keeps_its_checkpoint(tmp_path):
    from tests.helpers.kbatch import simple_batch
    from tests.unit.test_log import append, open_log
    b = simple_batch(2, size=100)
    p = open_log(tmp_path, segment_bytes=len(b) * 2)
    assert _file(tmp_path) == b"0\n1\n0 0\n"  # leader at epoch 0 from the start
    for _ in range(4):
        append(p, b)  # segments at 0 and 4
    p.delete_records(3)
    p.close()  # waits for the queued checkpoint
    assert _file(tmp_path) == b"0\n1\n0 3\n"
    p = open_log(tmp_path, segment_bytes=len(b) * 2)
    assert p.epochs.entries == [(0, 3)]
    p.log_start_offset = 6  # as retention moves it when it deletes a segment
    p.close()
    assert _file(tmp_path) == b"0\n1\n0 6\n"
    assert p.epochs.end_offset_for(-2, p.log_end_offset) == (-2, 6)


def test_partition_rebuilds_a_missing_or_stale_checkpoint(tmp_path):
    from tests.helpers.kbatch import simple_batch
    from tests.unit.test_log import append, open_log
    p = open_log(tmp_path)
    for _ in range(3):
        append(p, simple_batch(2))
    p.close()
    (tmp_path / "leader-epoch-checkpoint").unlink()  # a data dir from before the file
    p = open_log(tmp_path)
    assert p.epochs.entries == [(0, 0)] and _file(tmp_path) == b"0\n1\n0 0\n"
    p.close()
    # Entries past the log end (a log cut short by a crash) go; epoch 0 leads from the end.
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"0\n2\n0 0\n4 100\n")
    p = open_log(tmp_path)
    assert p.epochs.entries == [(0, 0)]
    p.close()
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"garbage")
    p = open_log(tmp_path)
    assert p.epochs.entries == [(0, 0)]
    p.close()
