# ListOffsets by time and by max timestamp (-3) read cold segments without waiting for the
# disk on the event loop: on the loop only RWF_NOWAIT reads (os.preadv) run; every blocking
# read (os.pread) of the lookup happens in a worker thread, and the answer is the same as
# the blocking lookup's. The page cache is dropped with posix_fadvise(DONTNEED) after fsync.
from __future__ import annotations

import os
import threading
import time

import pytest
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from kafkalite.log import reads

from tests.helpers.kbatch import simple_batch
from tests.unit.test_dispatch import broker, call  # noqa: F401 (broker: a fixture)
from tests.unit.test_log import append

T0 = int(time.time() * 1000) - 3_600_000
BATCHES = 300


@pytest.fixture
def pread_threads(monkeypatch) -> list[int]:
    """Thread id of each blocking os.pread; the real one runs."""
    seen: list[int] = []
    real = os.pread

    def observed(fd, n, offset):
        seen.append(threading.get_ident())
        return real(fd, n, offset)
    monkeypatch.setattr(os, "pread", observed)
    return seen




def _cold_partition(broker):
    """A partition of several rolled segments, then evicted from the page cache. Batch i
    holds records 4i..4i+3 stamped T0 + 40i + 0..3."""
    broker.create_topic("cold", 1, {"segment.bytes": "65536"})
    p = broker.logs.partition("cold", 0)
    for i in range(BATCHES):
        append(p, simple_batch(4, ts=T0 + 40 * i, size=200), now=T0)
    assert len(p.segments) > 3
    p.flush()  # also waits for the rolled segments' fsyncs
    for seg in p.segments:
        seg.time_index.unload()  # as after a restart: read on demand
    for name in os.listdir(p.directory):
        fd = os.open(os.path.join(p.directory, name), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return p


@pytest.mark.skipif(not reads._supported, reason="no RWF_NOWAIT on this file system")
async def test_a_nowait_lookup_of_cold_segments_would_block(broker):
    from kafkalite.log import partition_lookup
    p = _cold_partition(broker)
    with pytest.raises(reads.WouldBlock) as e:
        partition_lookup.offset_for_timestamp(p, T0 + 7005, nowait=True)
    e.value.release()


@pytest.mark.skipif(not reads._supported, reason="no RWF_NOWAIT on this file system")
async def test_list_offsets_by_time_reads_cold_segments_off_the_loop(broker, pread_threads):
    p = _cold_partition(broker)
    pread_threads.clear()  # writing it read some on this thread
    Req = ListOffsetsRequest[7]
    wanted = [(0, T0 + 7005), (0, -3), (0, T0 + 40 * BATCHES)]
    answers = []
    for _part, ts in wanted:
        req = Req(replica_id=-1, isolation_level=0, topics=[Req.ListOffsetsTopic(
            name="cold", partitions=[Req.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
        resp = await call(broker, req, ListOffsetsResponse[7])
        (part,) = resp.topics[0].partitions
        answers.append((part.error_code, part.timestamp, part.offset))
    loop = threading.get_ident()
    assert pread_threads and loop not in pread_threads
    # The first record at or after T0 + 7005 opens batch 176; the largest stamp is the
    # last record's; nothing is at or after T0 + 40 * BATCHES.
    last = 4 * BATCHES - 1
    assert answers == [(0, T0 + 7040, 704), (0, T0 + 40 * (BATCHES - 1) + 3, last),
                       (0, -1, -1)]
    assert answers[:2] == [(0, *reversed(p.offset_for_timestamp(T0 + 7005))),
                           (0, *reversed(p.max_timestamp_offset()))]
