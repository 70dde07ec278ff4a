# Durability work off the caller's thread: a roll, flush.messages, flush.ms and the log
# start checkpoint never fsync on the thread that appends (the event loop's, in the
# broker); close() waits for what is queued; after an unclean shutdown the segments past
# the recovery point are checked, not only the last one; reads that would wait for the
# disk say so instead of blocking.
#
# os.fsync is wrapped only to observe which thread calls it: the real fsync still runs.
from __future__ import annotations

import asyncio
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kafkalite.log import reads
from kafkalite.log.partition import LogConfig, PartitionLog

from tests.helpers.kbatch import simple_batch, stored_form
from tests.unit.test_log import append, open_log, read_all, segment_files


@pytest.fixture
def fsync_threads(monkeypatch) -> list[int]:
    """Thread ids of every os.fsync call, in order."""
    calls: list[int] = []
    real = os.fsync

    def observed(fd: int) -> None:
        calls.append(threading.get_ident())
        real(fd)
    monkeypatch.setattr(os, "fsync", observed)
    return calls


def test_roll_does_not_fsync_on_the_calling_thread(tmp_path, fsync_threads):
    b = simple_batch(2, size=100)
    p = open_log(tmp_path, segment_bytes=len(b) * 2)
    for _ in range(6):
        append(p, b)  # rolls at offsets 4 and 8
    assert segment_files(tmp_path) == [f"{o:020d}.log" for o in (0, 4, 8)]
    assert threading.get_ident() not in fsync_threads
    p.close()  # waits for the queued flushes
    assert fsync_threads and threading.get_ident() not in fsync_threads
    with open(tmp_path / "recovery-point") as f:
        assert int(f.read()) == 8  # both rolled segments are on disk
    assert read_all(open_log(tmp_path)) == b"".join(stored_form(b, 2 * i) for i in range(6))


def test_flush_messages_and_flush_ms_fsync_off_the_calling_thread(tmp_path, fsync_threads):
    b = simple_batch(1)
    p = open_log(tmp_path, flush_messages=2)
    append(p, b)
    assert p.take_ack_flush() is None and p.unflushed_messages == 1
    append(p, b)
    fut = p.take_ack_flush()  # the producer's answer waits for this one
    assert fut is not None and fut.result() is None and p.unflushed_messages == 0
    assert fsync_threads and threading.get_ident() not in fsync_threads
    q = open_log(tmp_path / "q", flush_ms=1000)
    append(q, b)
    fsync_threads.clear()
    q.maybe_flush_by_time(q.last_flush_ms + 999)
    q.close()
    assert fsync_threads == []  # not due yet
    q = open_log(tmp_path / "q", flush_ms=1000)
    append(q, b)
    q.maybe_flush_by_time(q.last_flush_ms + 1000)
    assert q.unflushed_messages == 0
    q.close()
    assert fsync_threads and threading.get_ident() not in fsync_threads
    p.close()


def test_start_checkpoint_and_segment_removal_off_the_calling_thread(tmp_path,
                                                                     fsync_threads):
    b = simple_batch(2)
    p = open_log(tmp_path, segment_bytes=len(b) * 2)
    for _ in range(6):
        append(p, b)
    assert p.delete_records(5) == 5
    asyncio.run(p.start_offset_durable())  # DeleteRecords answers after this
    with open(tmp_path / "log-start-offset") as f:
        assert int(f.read()) == 5
    assert threading.get_ident() not in fsync_threads
    p.close()
    assert segment_files(tmp_path) == [f"{o:020d}.log" for o in (4, 8)]
    assert not [n for n in os.listdir(tmp_path) if n.startswith("0" * 20)]  # no leftovers
    assert open_log(tmp_path).log_start_offset == 5


def test_close_waits_for_queued_flushes(tmp_path):
    gate = threading.Event()
    worker = ThreadPoolExecutor(max_workers=1)
    try:
        worker.submit(gate.wait, 30)  # the flusher is busy with someone else's work
        b = simple_batch(2)
        p = PartitionLog(str(tmp_path), "t", 0, LogConfig(segment_bytes=len(b)), flusher=worker)
        append(p, b)
        append(p, b)  # a roll: its flush queues behind the busy job
        assert not os.path.exists(tmp_path / "recovery-point")
        threading.Timer(0.05, gate.set).start()
        p.close()
        with open(tmp_path / "recovery-point") as f:
            assert int(f.read()) == 2
    finally:
        gate.set()
        worker.shutdown()


def _tear_first_segment(path) -> None:
    seg = path / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # inside the last batch's CRC-covered bytes
    seg.write_bytes(bytes(data))


def test_unclean_recovery_checks_exactly_the_segments_past_the_recovery_point(tmp_path):
    """A power loss may tear a rolled segment whose fsync was still queued: recovery checks
    every segment the recovery point does not cover, and trusts (does not rescan) the ones
    it covers, as Kafka does."""
    b = simple_batch(2, size=100)
    for flushed in (False, True):
        d = tmp_path / str(flushed)
        p = open_log(d, segment_bytes=len(b) * 2)
        for _ in range(6):
            append(p, b)
        p.close()
        if not flushed:
            (d / "recovery-point").write_text("0")  # as if the rolls' flushes never ran
        _tear_first_segment(d)
        q = open_log(d, recover=True, segment_bytes=len(b) * 2)
        first = q.segments[0]
        if flushed:
            assert first.next_offset == 4  # trusted, not rescanned
        else:
            assert first.next_offset == 2 and first.size == len(b)  # cut at the torn batch
            assert read_all(q)[:len(b)] == stored_form(b, 0)
        assert q.log_end_offset == 12
        q.close()


def test_nowait_read_of_uncached_data_would_block_then_warms(tmp_path):
    b = simple_batch(1, size=4000)
    p = open_log(tmp_path)
    for _ in range(64):
        append(p, b)
    fd = p.active.fd
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # drop the clean pages
    with pytest.raises(reads.WouldBlock) as e:
        reads.pread(fd, 65536, 0, nowait=True)
    e.value.warm()  # what the worker thread does; the range is cached afterwards
    data = reads.pread(fd, 65536, 0, nowait=True)
    assert struct.unpack_from(">q", data)[0] == 0
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    got = asyncio.run(p.read_async(10, 1 << 20))  # goes through a worker, then reads
    assert bytes(got).startswith(stored_form(b, 10))
    p.close()
