# The segmented log without a network: appends and reads, sparse indexes, rolling,
# retention, DeleteRecords, crash recovery and index rebuilds, timestamp lookups.
from __future__ import annotations

import logging
import os
import struct

import pytest

from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.log.errors import OffsetOutOfRange
from kafkalite.wire.records import validate_produce_batch

from tests.helpers.kbatch import CODECS, build_batch, decode_records, simple_batch, stored_form

T0 = 1_700_000_000_000


def open_log(path, recover: bool = False, **cfg) -> PartitionLog:
    return PartitionLog(str(path), "t", 0, LogConfig(**cfg), recover=recover)


def append(p: PartitionLog, batch: bytes, now: int = T0) -> int:
    return p.append(batch, validate_produce_batch(batch, 1 << 30), now)


def read_all(p: PartitionLog, max_bytes: int = 1 << 20) -> bytes:
    """Every stored batch from the log start to the end, as whole batches."""
    out = bytearray()
    off = p.log_start_offset
    for _ in range(100_000):
        if off >= p.log_end_offset:
            break
        data = p.read(off, max_bytes)
        pos = 0
        while pos + 12 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if pos + 12 + length > len(data):
                break
            out += data[pos:pos + 12 + length]
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            off = base + delta + 1
            pos += 12 + length
    return bytes(out)


def segment_files(path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


def test_append_assigns_offsets_and_stores_bytes(tmp_path):
    p = open_log(tmp_path)
    batches = [simple_batch(n, tag=b"%d" % n) for n in (1, 5, 2)]
    bases = [append(p, b) for b in batches]
    assert bases == [0, 1, 6]
    assert p.log_end_offset == p.high_watermark == 8
    expected = b"".join(stored_form(b, o) for b, o in zip(batches, bases))
    assert read_all(p) == expected
    # A read at any offset starts at the batch holding it.
    assert p.read(3, 1 << 20).startswith(stored_form(batches[1], 1))
    assert p.read(8, 1 << 20) == b""
    for bad in (-1, 9):
        with pytest.raises(OffsetOutOfRange):
            p.read(bad, 100)
    p.close()


def test_read_respects_max_bytes_but_returns_one_whole_batch(tmp_path):
    p = open_log(tmp_path)
    big = simple_batch(1, size=3000)
    append(p, big)
    append(p, simple_batch(1))
    assert p.read(0, 100) == stored_form(big, 0)  # KIP-74: the first batch, whole
    assert p.read(0, 100, min_one_batch=False) == stored_form(big, 0)[:100]
    assert len(p.read(0, len(big) + 10)) == len(big) + 10  # a partial next batch, like Kafka
    p.close()


def test_sparse_index_lookups(tmp_path):
    p = open_log(tmp_path, index_interval_bytes=500)
    batches = [simple_batch(3, size=40, tag=b"%d" % i) for i in range(60)]
    for b in batches:
        append(p, b)
    seg = p.active
    assert 5 < len(seg.index) < 60  # sparse: some batches indexed, not all
    for off in range(0, 180, 7):
        data = p.read(off, 1)
        base, _ = struct.unpack_from(">qi", data)
        assert base == off - off % 3 and data == stored_form(batches[off // 3], base)
    # Index lookups return the last entry at or below the wanted offset.
    io, ipos = seg.index.lookup(100)
    assert io <= 100 and struct.unpack(">q", seg.read(ipos, 8))[0] == io
    p.close()


def test_roll_by_size(tmp_path):
    b = simple_batch(2, size=100)
    p = open_log(tmp_path, segment_bytes=len(b) * 3)
    for _ in range(10):
        append(p, b)
    assert segment_files(tmp_path) == [f"{o:020d}.log" for o in (0, 6, 12, 18)]
    assert all(s.size <= len(b) * 3 for s in p.segments)
    assert read_all(p) == b"".join(stored_form(b, 2 * i) for i in range(10))
    assert read_all(p, max_bytes=1) == read_all(p)
    p.close()


def test_roll_by_time(tmp_path):
    p = open_log(tmp_path, segment_ms=60_000)
    append(p, simple_batch(1, ts=T0))
    append(p, simple_batch(1, ts=T0 + 59_000))
    assert len(p.segments) == 1
    append(p, simple_batch(1, ts=T0 + 61_000))  # later than first batch + segment.ms
    assert len(p.segments) == 2 and p.active.base_offset == 2
    p.close()


def test_retention_by_time_deletes_whole_old_segments(tmp_path):
    b_old, b_new = simple_batch(2, ts=T0), simple_batch(2, ts=T0 + 10_000_000)
    p = open_log(tmp_path, segment_bytes=len(b_old) * 2, retention_ms=1_000_000)
    for _ in range(4):
        append(p, b_old)
    append(p, b_new)
    assert len(p.segments) == 3
    assert p.apply_retention(now_ms=T0 + 10_000_000) == 2
    assert p.log_start_offset == 8 and p.segments[0].base_offset == 8
    assert segment_files(tmp_path) == [f"{8:020d}.log"]
    assert not [n for n in os.listdir(tmp_path)
                if n.startswith("0" * 20) and n.endswith(("index", "timeindex"))]
    with pytest.raises(OffsetOutOfRange):
        p.read(7, 100)
    assert read_all(p) == stored_form(b_new, 8)
    assert p.apply_retention(now_ms=T0 + 10_000_000) == 0
    p.close()
    q = open_log(tmp_path)
    assert (q.log_start_offset, q.log_end_offset) == (8, 10)
    q.close()


def test_retention_by_time_can_empty_the_log(tmp_path):
    p = open_log(tmp_path, retention_ms=1000)
    append(p, simple_batch(3, ts=T0))
    assert p.apply_retention(now_ms=T0 + 5000) == 1
    assert (p.log_start_offset, p.log_end_offset) == (3, 3)
    assert append(p, simple_batch(1)) == 3
    p.close()


def test_retention_by_bytes(tmp_path):
    b = simple_batch(1, size=200)
    p = open_log(tmp_path, segment_bytes=len(b) * 2, retention_bytes=len(b) * 3)
    for _ in range(7):  # segments of 2, 2, 2, 1 batches
        append(p, b)
    assert p.apply_retention(now_ms=T0) == 2  # 7 - 2 - 2 = 3 batches <= retention
    assert p.log_start_offset == 4 and p.size == len(b) * 3
    p.close()


def test_delete_records(tmp_path):
    b = simple_batch(2)
    p = open_log(tmp_path, segment_bytes=len(b) * 2)
    for _ in range(6):
        append(p, b)  # segments at 0, 4, 8
    assert p.delete_records(5) == 5
    assert p.log_start_offset == 5 and [s.base_offset for s in p.segments] == [4, 8]
    with pytest.raises(OffsetOutOfRange):
        p.read(4, 100)
    assert p.read(5, 1).startswith(stored_form(b, 4))  # the batch holding 5
    assert p.delete_records(3) == 5  # never moves backwards
    with pytest.raises(OffsetOutOfRange):
        p.delete_records(13)
    p.close()
    q = open_log(tmp_path, segment_bytes=len(b) * 2)
    assert q.log_start_offset == 5  # checkpointed
    assert q.delete_records(-1) == 12 and q.log_end_offset == 12
    assert append(q, b) == 12
    q.close()


def _make_log(path, n: int, **cfg) -> tuple[PartitionLog, list[bytes]]:
    p = open_log(path, **cfg)
    batches = [simple_batch(1 + i % 3, size=50 + i, tag=b"%d" % i) for i in range(n)]
    for b in batches:
        append(p, b)
    return p, batches


def _expected(batches: list[bytes]) -> bytes:
    out, off = [], 0
    for b in batches:
        out.append(stored_form(b, off))
        off += struct.unpack_from(">i", b, 23)[0] + 1
    return b"".join(out)


def test_recovery_truncates_a_torn_tail(tmp_path, caplog):
    p, batches = _make_log(tmp_path, 20, index_interval_bytes=300)
    seg_path = p.active.path
    p.close()  # no clean-shutdown: the caller reopens with recover=True
    size = os.path.getsize(seg_path)
    os.truncate(seg_path, size - 7)
    with caplog.at_level(logging.WARNING, logger="kafkalite.log"):
        q = open_log(tmp_path, recover=True, index_interval_bytes=300)
    assert "truncated" in caplog.text
    assert read_all(q) == _expected(batches[:-1])
    assert q.log_end_offset == sum(1 + i % 3 for i in range(19))
    assert os.path.getsize(seg_path) == len(_expected(batches[:-1]))
    # Indexes were rebuilt consistently: appends continue at the right offset and position.
    assert append(q, batches[0]) == q.log_end_offset - 1
    q.close()


def test_recovery_truncates_at_a_flipped_byte(tmp_path, caplog):
    p, batches = _make_log(tmp_path, 20, index_interval_bytes=300)
    seg_path = p.active.path
    p.close()
    good = _expected(batches[:12])
    with open(seg_path, "r+b") as f:
        f.seek(len(good) + 40)  # inside batch 12's records
        byte = f.read(1)
        f.seek(len(good) + 40)
        f.write(bytes([byte[0] ^ 0x10]))
    with caplog.at_level(logging.WARNING, logger="kafkalite.log"):
        q = open_log(tmp_path, recover=True, index_interval_bytes=300)
    assert "truncated" in caplog.text
    assert read_all(q) == good
    idx = q.active.index
    assert all(idx.lookup(o)[1] < len(good) for o in range(q.log_end_offset))
    q.close()
    r = open_log(tmp_path, index_interval_bytes=300)  # clean reopen trusts the new index
    assert read_all(r) == good
    r.close()


@pytest.mark.parametrize("damage", ["missing", "odd_size", "out_of_order", "past_end",
                                    "wrong_offset"])
def test_bad_index_files_are_rebuilt(tmp_path, damage, caplog):
    b = simple_batch(2, size=100)
    p = open_log(tmp_path, segment_bytes=len(b) * 20, index_interval_bytes=len(b))
    for _ in range(30):
        append(p, b)
    first = p.segments[0]
    idx_path, n_entries = first.index.path, len(first.index)
    assert n_entries > 2
    expected = read_all(p)
    p.close()
    if damage == "missing":
        os.unlink(idx_path)
        os.unlink(idx_path.replace(".index", ".timeindex"))
    else:
        with open(idx_path, "r+b") as f:
            data = bytearray(f.read())
            if damage == "odd_size":
                data += b"\x01\x02\x03"
            elif damage == "out_of_order":
                data[0:8], data[8:16] = data[8:16], data[0:8]
            elif damage == "past_end":
                struct.pack_into(">II", data, len(data) - 8, 38, 10**7)
            elif damage == "wrong_offset":  # a plausible entry pointing mid-batch
                struct.pack_into(">II", data, len(data) - 8, 38, len(b) * 19 + 30)
            f.seek(0)
            f.truncate()
            f.write(data)
    with caplog.at_level(logging.WARNING, logger="kafkalite.log"):
        q = open_log(tmp_path, segment_bytes=len(b) * 20, index_interval_bytes=len(b))
    assert len(q.segments[0].index) == n_entries
    assert os.path.getsize(idx_path) == n_entries * 8
    assert read_all(q) == expected
    for off in range(0, 60, 5):
        assert struct.unpack_from(">q", q.read(off, 1))[0] == off - off % 2
    q.close()


# --- timestamps (ListOffsets) ---------------------------------------------------------------

def _ts_batch(tss: list[int], codec: int = 0) -> bytes:
    return build_batch([(b"k", b"value-%d" % t * 20, [], t) for t in tss], codec)


@pytest.mark.parametrize("codec", CODECS.values())
def test_offset_for_timestamp(tmp_path, codec):
    p = open_log(tmp_path, index_interval_bytes=1, segment_bytes=2000)
    append(p, _ts_batch([T0 + 10, T0 + 5, T0 + 30], codec))   # offsets 0-2
    append(p, _ts_batch([T0 + 20, T0 + 25], codec))           # 3-4
    append(p, _ts_batch([T0 + 40, T0 + 50, T0 + 45], codec))   # 5-7
    for _ in range(5):
        append(p, _ts_batch([T0 + 60], codec))                # 8-12, across segments
    cases = {0: (0, T0 + 10), T0: (0, T0 + 10), T0 + 10: (0, T0 + 10),
             T0 + 11: (2, T0 + 30), T0 + 21: (2, T0 + 30), T0 + 31: (5, T0 + 40),
             T0 + 46: (6, T0 + 50), T0 + 55: (8, T0 + 60), T0 + 60: (8, T0 + 60),
             T0 + 61: None}
    for ts, want in cases.items():
        assert p.offset_for_timestamp(ts) == want, ts
    assert p.max_timestamp_offset() == (8, T0 + 60)
    p.delete_records(9)
    assert p.offset_for_timestamp(T0 + 55) == (9, T0 + 60)
    p.close()


def test_max_timestamp_offset_picks_first_record_with_the_largest(tmp_path):
    p = open_log(tmp_path, index_interval_bytes=1)
    append(p, _ts_batch([T0 + 1, T0 + 9, T0 + 2]))
    append(p, _ts_batch([T0 + 3, T0 + 9]))
    assert p.max_timestamp_offset() == (1, T0 + 9)
    p.close()
    assert open_log(tmp_path).max_timestamp_offset() == (1, T0 + 9)


def test_log_append_time_topic(tmp_path):
    p = open_log(tmp_path, log_append_time=True)
    append(p, _ts_batch([T0 + 1, T0 + 2]), now=T0 + 500)
    append(p, _ts_batch([T0 + 3]), now=T0 + 900)
    assert [r[1] for r in decode_records(read_all(p))] == [T0 + 500, T0 + 500, T0 + 900]
    assert p.offset_for_timestamp(T0 + 501) == (2, T0 + 900)
    assert p.max_timestamp_offset() == (2, T0 + 900)
    p.close()


def test_time_index_keeps_running_max_across_reopen(tmp_path):
    """A batch with a high timestamp between index points must not be forgotten when the
    segment is reopened: its maximum decides retention and timestamp lookups."""
    a, b, c = _ts_batch([T0 + 100]), _ts_batch([T0 + 300]), _ts_batch([T0 + 200])
    interval = len(a) * 2 - 1  # a and c land on index points, b does not
    p = open_log(tmp_path, index_interval_bytes=interval)
    for x in (a, b, c):
        append(p, x)
    assert p.active.max_timestamp == T0 + 300
    assert p.offset_for_timestamp(T0 + 250) == (1, T0 + 300)
    p.close()
    q = open_log(tmp_path, index_interval_bytes=interval)
    assert q.active.max_timestamp == T0 + 300
    assert q.offset_for_timestamp(T0 + 250) == (1, T0 + 300)
    assert q.max_timestamp_offset() == (1, T0 + 300)
    q.roll()
    q.close()
    r = open_log(tmp_path, index_interval_bytes=interval)
    assert r.segments[0].max_timestamp == T0 + 300
    assert r.offset_for_timestamp(T0 + 250) == (1, T0 + 300)
    r.close()


def test_damaged_middle_index_entry_is_not_followed(tmp_path, caplog):
    """Only the first and last entries are checked on load; a middle one pointing inside a
    batch is caught on use (its batch's base offset does not match) and bypassed."""
    b = simple_batch(1, size=80)
    p = open_log(tmp_path, index_interval_bytes=len(b) * 2)
    for _ in range(40):
        append(p, b)
    expected = read_all(p)
    idx = p.active.index
    p.close()
    with open(idx.path, "r+b") as f:
        data = bytearray(f.read())
        mid = (len(data) // 16) * 8
        rel, pos = struct.unpack_from(">II", data, mid)
        struct.pack_into(">II", data, mid, rel, pos - 1)  # still ascending, now mid-batch
        f.seek(0)
        f.write(data)
    q = open_log(tmp_path, index_interval_bytes=len(b) * 2)
    with caplog.at_level(logging.WARNING, logger="kafkalite.log"):
        assert q.read(rel, 1) == stored_form(b, rel)
    assert "not a batch boundary" in caplog.text
    assert read_all(q) == expected
    q.close()


def test_index_write_failure_keeps_the_batch_counted(tmp_path, caplog):
    """The batch reaches the log but its index entry cannot be written (disk full): the
    append still counts, so its offsets are not handed out again."""
    b = simple_batch(1)
    p = open_log(tmp_path, index_interval_bytes=0)  # an index entry per batch
    append(p, b)
    idx = p.active.index
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, idx._open_fd())  # writes to the index now fail with ENOSPC
    finally:
        os.close(full)
    with caplog.at_level(logging.WARNING, logger="kafkalite.log"):
        assert append(p, b) == 1
    assert "not written" in caplog.text
    idx.close()  # the next append reopens the real file
    assert append(p, b) == 2
    assert read_all(p) == b"".join(stored_form(b, o) for o in range(3))
    p.close()
    q = open_log(tmp_path, recover=True, index_interval_bytes=0)
    assert read_all(q) == b"".join(stored_form(b, o) for o in range(3))
    q.close()


def test_remembered_read_positions_serve_the_same_bytes_as_a_fresh_lookup(tmp_path):
    """A consumer's next fetch (the offset after the last whole batch it got) is served from
    the position where its last read ended; it must be byte for byte what the index lookup
    gives, across rolls, a cut-short last batch, max_bytes below one batch, and retention."""
    p = open_log(tmp_path / "p", segment_bytes=3000)
    for i in range(60):
        append(p, simple_batch(1 + i % 5, tag=b"r%d" % i))
    fresh = open_log(tmp_path / "p")  # same files, no remembered positions
    for max_bytes in (1, 150, 700, 5000):
        offset, reads = 0, 0
        while offset < p.log_end_offset:
            got = p.read(offset, max_bytes)
            assert got == fresh.read(offset, max_bytes), (max_bytes, offset)
            recs = decode_records(bytes(got))
            assert recs, (max_bytes, offset)
            offset = recs[-1][0] + 1
            reads += 1
        assert reads > 1
    assert len(p._read_positions) > 0  # the walk above used them
    p.delete_records(p.segments[1].base_offset)  # drops the first segment
    off = p.log_start_offset
    assert p.read(off, 5000) == fresh.read(off, 5000)
    fresh.close()
    p.close()
