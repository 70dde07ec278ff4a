# Idempotent-producer state without sockets: expiry with explicit times and on the broker's
# tick with a FakeClock (KIP-360: an expired producer starts again at any sequence), Kafka's
# snapshot format checked byte for byte against files Apache Kafka 3.8.0 wrote, what a start
# loads (Kafka's stray and range rules, a corrupt newest file, kafkalite 0.1.0's JSON),
# snapshots written at each roll on the snapshot thread, a crash followed by a replay of the
# tail only, and the producer-id allocator reserving blocks off the event loop.
from __future__ import annotations

import asyncio
import json
import logging
import os
import threading

import pytest
from kafka.protocol.producer import ProduceResponse

from kafkalite.broker.broker import Broker
from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator import producer_snapshot as snap
from kafkalite.coordinator.producers import PartitionProducers, ProducerIdAllocator
from kafkalite.fileio import atomic_write
from kafkalite.wire.errors import ErrorCode, KafkaError
from kafkalite.wire.records import parse_header

from tests.helpers.kbatch import simple_batch
from tests.unit.test_dispatch import call, produce_req

DAY = 86_400_000
# Written by Apache Kafka 3.8.0 at a clean shutdown, after raw produces of producer 4000
# (seqs 0-1, then 2-5 at offset 3), 4002 (seq 0 at offset 2) and 4001 (3 records from seq
# 2147483646, wrapping to 0, at offset 7); `kafka-dump-log.sh` shows them as
# "producerId: 4001 ... firstSequence: 2147483646 lastSequence: 0 lastOffset: 9 offsetDelta: 2".
KAFKA_SNAPSHOT = bytes.fromhex(
    "0001f2234a2c000000030000000000000fa0000000000005000000000000000600000003000001a20aca0d81"
    "ffffffffffffffffffffffff0000000000000fa1000000000000000000000000000900000002000001a20aca"
    "0d89ffffffffffffffffffffffff0000000000000fa20000000000000000000000000002000000000000"
    "01a20aca0d77ffffffffffffffffffffffff")
KAFKA_EMPTY_SNAPSHOT = bytes.fromhex("000148674bc700000000")  # at a roll, no producers


# --- expiry -------------------------------------------------------------------------------

def test_a_producer_expires_when_its_last_batch_is_as_old_as_the_setting():
    st = PartitionProducers()
    st.update(1, 0, 0, 4, 0, timestamp=1_000)
    st.update(2, 0, 0, 0, 5, timestamp=5_000)
    st.update(1, 0, 5, 0, 6, timestamp=2_000)  # the last batch's timestamp counts
    assert st.expire(now_ms=2_000 + DAY - 1, expiration_ms=DAY) == 0
    assert st.expire(now_ms=2_000 + DAY, expiration_ms=DAY) == 1  # Kafka: now - ts >= setting
    assert list(st.producers) == [2]
    assert st.expire(now_ms=5_000 + DAY - 1, expiration_ms=DAY) == 0
    assert list(st.producers) == [2]


def test_an_expired_producer_starts_again_at_any_sequence():
    st = PartitionProducers()
    st.update(7, 0, 0, 9, 0, timestamp=0)
    with pytest.raises(KafkaError) as e:
        st.check(7, 0, 77, 0)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    st.expire(now_ms=DAY, expiration_ms=DAY)
    assert st.check(7, 0, 77, 0) is None  # KIP-360: its state may have expired
    st.update(7, 0, 77, 0, 10, timestamp=DAY)
    with pytest.raises(KafkaError):
        st.check(7, 0, 79, 0)
    assert st.check(7, 0, 77, 0) == 10  # and duplicates are recognised again
    assert st.check(7, 0, 78, 0) is None


def _broker(directory, clock: FakeClock | None = None, **settings: str) -> Broker:
    b = Broker(BrokerConfig({"log.dirs": str(directory),
                             **{k.replace("_", "."): v for k, v in settings.items()}}), clock)
    b.open()
    return b


async def _produce(b: Broker, topic: str, pid: int, seq: int, n: int = 2,
                   ts: int | None = None, partition: int = 0):
    """One idempotent batch through Broker.dispatch; returns the partition's answer."""
    batch = simple_batch(n, ts=ts, producer_id=pid, producer_epoch=0, base_sequence=seq)
    r = await call(b, produce_req(9, topic, [(partition, batch)]), ProduceResponse)
    return r.responses[0].partition_responses[0]


async def test_the_broker_tick_expires_producers_by_the_injected_clock(tmp_path):
    clock = FakeClock()
    b = _broker(tmp_path, clock, producer_id_expiration_ms="60000",
                producer_id_expiration_check_interval_ms="10000")
    try:
        b.create_topic("t", 1)
        p = b.logs.partition("t", 0)
        r = await _produce(b, "t", 3, 0, ts=clock.wall_ms() - 1)  # max timestamp: now
        assert r.error_code == 0
        clock.advance(50_000)
        assert b.expire_producers() == 0
        assert list(b.producer_state(p).producers) == [3]
        clock.advance(10_000)
        assert b.expire_producers() == 1  # 60 s old now, and a check is due
        assert b.producer_state(p).producers == {}
        r = await _produce(b, "t", 3, 77, n=1, ts=clock.wall_ms())
        assert (r.error_code, r.base_offset) == (0, 2)
        clock.advance(60_000)
        assert b.expire_producers() == 1
        b.create_topic("u", 1)
        b.producers.state(b.logs.partition("u", 0)).update(9, 0, 0, 0, 0, timestamp=0)
        assert b.expire_producers() == 0  # checks run once per check interval
        clock.advance(10_000)
        assert b.expire_producers() == 1
    finally:
        b.close()


# --- Kafka's snapshot format --------------------------------------------------------------

def test_snapshot_format_is_kafkas_byte_for_byte():
    entries = snap.decode(KAFKA_SNAPSHOT)
    assert [(pid, seq, last, delta) for pid, _e, seq, last, delta, _ts, *_txn in entries] == \
        [(4000, 5, 6, 3), (4001, 0, 9, 2), (4002, 0, 2, 0)]
    assert snap.encode(entries) == KAFKA_SNAPSHOT
    assert snap.decode(KAFKA_EMPTY_SNAPSHOT) == [] and snap.encode([]) == KAFKA_EMPTY_SNAPSHOT
    st = PartitionProducers()
    st.restore(entries, now_ms=0, expiration_ms=DAY)
    assert st.check(4001, 0, 2147483646, 2) == 7  # the wrapped batch is a duplicate
    assert st.check(4001, 0, 1, 0) is None
    assert st.check(4000, 0, 2, 3) == 3
    assert st.snapshot() == KAFKA_SNAPSHOT
    torn = bytearray(KAFKA_SNAPSHOT)
    torn[30] ^= 1
    for bad in (bytes(torn), KAFKA_SNAPSHOT[:-1], b"\x00\x02" + KAFKA_SNAPSHOT[2:], b""):
        with pytest.raises(snap.CorruptSnapshot):
            snap.decode(bad)


def _write(directory, offset, state: PartitionProducers) -> None:
    snap.write(str(directory), offset, state.snapshot(), durable=False)


def _one_producer(pid: int, seq: int, offset: int, ts: int = 0) -> PartitionProducers:
    st = PartitionProducers()
    st.update(pid, 0, seq, 0, offset, timestamp=ts)
    return st


def _load(directory, log_end: int) -> tuple[PartitionProducers, int]:
    st = PartitionProducers()
    start, legacy = st.load(str(directory), log_start=10, log_end=log_end,
                            segment_bases=[10, 20, 30, 40], now_ms=0, expiration_ms=DAY)
    assert not legacy
    return st, start


def test_load_takes_the_newest_usable_snapshot_as_kafkas_loader(tmp_path):
    d = tmp_path
    for off in (10, 20, 30, 35, 40, 50):
        _write(d, off, _one_producer(1, off, off - 1))
    with open(d / snap.file_name(50), "r+b") as f:
        f.write(b"\x00\x07")  # a torn newest file
    (d / (snap.file_name(60) + ".tmp")).write_bytes(b"half")
    st, start = _load(d, log_end=65)
    # 10 is at the log start (Kafka drops it), 35 a stray older than the newest stray (50,
    # a clean shutdown's), 50 fails its CRC: 40 is loaded, the older ones stay.
    assert start == 40
    assert st.check(1, 0, 40, 0) == 39
    assert st.snapshots == [20, 30, 40]
    assert sorted(os.listdir(d)) == [snap.file_name(o) for o in (20, 30, 40)]
    _write(d, 55, _one_producer(1, 55, 54))
    st, start = _load(d, log_end=50)  # the log lost its tail: 55 describes offsets it lacks
    assert (start, st.snapshots, snap.list_offsets(str(d))) == (40, [20, 30, 40], [20, 30, 40])


def test_expired_producers_are_not_loaded(tmp_path):
    st = PartitionProducers()
    st.update(1, 0, 0, 0, 0, timestamp=1_000)
    st.update(2, 0, 0, 0, 1, timestamp=9_000)
    _write(tmp_path, 2, st)
    loaded = PartitionProducers()
    loaded.load(str(tmp_path), 0, 2, [0], now_ms=1_000 + DAY, expiration_ms=DAY)
    assert list(loaded.producers) == [2]


def test_kafkalite_0_1_json_state_is_migrated(tmp_path):
    # What kafkalite 0.1.0 wrote at clean shutdown: every cached batch, no timestamps.
    legacy = {"offset": 13, "producers": {"5": [0, [[2, 4, 2], [5, 5, 5], [6, 7, 6],
                                                    [8, 11, 8], [12, 12, 12]]]}}
    data = tmp_path / "data"
    b = _broker(data)
    b.create_topic("old", 1)
    for seq, n in ((0, 2), (2, 3), (5, 1), (6, 2), (8, 4), (12, 1)):
        b.logs.partition("old", 0).append(*_batch(5, seq, n))
    b.close(clean=False)
    (data / "old-0" / snap.LEGACY).write_text(json.dumps(legacy))
    b = _broker(data)
    try:
        st = b.producer_state(b.logs.partition("old", 0))
        assert [st.check(5, 0, s, d) for s, d in ((2, 2), (5, 0), (6, 1), (8, 3))] == \
            [2, 5, 6, 8]
        b.producers.writer.drain()
        assert os.listdir(data / "old-0").count(snap.LEGACY) == 0
        assert snap.list_offsets(str(data / "old-0")) == [13]
    finally:
        b.close()


def _batch(pid: int, seq: int, n: int):
    raw = simple_batch(n, producer_id=pid, producer_epoch=0, base_sequence=seq)
    return raw, parse_header(raw)


# --- snapshots at roll, restarts ----------------------------------------------------------

def _small_segments(tmp_path) -> Broker:
    return _broker(tmp_path / "data", log_segment_bytes="600")


async def test_each_roll_writes_a_snapshot_on_the_snapshot_thread(tmp_path, monkeypatch):
    threads = []
    real_write = snap.write

    def spy(*args, **kw):
        threads.append(threading.current_thread().name)
        return real_write(*args, **kw)
    monkeypatch.setattr(snap, "write", spy)
    b = _small_segments(tmp_path)
    try:
        b.create_topic("r", 1)
        await b.add_partitions("r", 2)  # CreatePartitions: the new partition snapshots too
        written: dict[int, list] = {0: [], 1: []}
        for seq in range(0, 40, 2):
            for part in (0, 1):
                r = await _produce(b, "r", 11 + part, seq, partition=part)
                written[part].append(r.base_offset)
        b.producers.writer.drain()
        for part in (0, 1):
            p = b.logs.partition("r", part)
            bases = [s.base_offset for s in p.segments]
            assert len(bases) > 3
            assert snap.list_offsets(p.directory) == bases[1:]
            for base in bases[1:]:  # each holds the producer's last batch before the roll
                [(pid, _e, seq, last, delta, _ts, _ce, _txn)] = snap.read(p.directory, base)
                assert (pid, last - delta) == (11 + part, max(o for o in written[part]
                                                              if o < base))
        assert threads and all(t.startswith("producer-snapshots") for t in threads)
    finally:
        b.close()


async def test_a_crash_replays_only_the_tail_after_the_newest_snapshot(tmp_path, caplog):
    b = _small_segments(tmp_path)
    b.create_topic("c", 1)
    for seq in range(0, 200, 2):
        last_offset = (await _produce(b, "c", 4, seq)).base_offset
    segments = len(b.logs.partition("c", 0).segments)
    b.close(clean=False)  # as a crash: no shutdown snapshot, no clean-shutdown marker
    caplog.set_level(logging.INFO, "kafkalite.broker")
    b = _small_segments(tmp_path)
    try:
        [line] = [r.getMessage() for r in caplog.records if "producer state" in r.getMessage()]
        replayed = int(line.split("(")[1].split()[0])
        assert 0 < replayed <= 100 // segments + 2, line  # the active segment only
        st = b.producer_state(b.logs.partition("c", 0))
        assert st.check(4, 0, 198, 1) == last_offset  # the newest batch is a duplicate
        with pytest.raises(KafkaError):
            st.check(4, 0, 300, 0)
    finally:
        b.close()


async def test_snapshots_of_deleted_segments_are_deleted(tmp_path):
    clock = FakeClock()
    b = _broker(tmp_path, clock, log_segment_bytes="600",
                producer_id_expiration_check_interval_ms="1000")
    b.create_topic("d", 1)
    p = b.logs.partition("d", 0)
    try:
        for seq in range(0, 60, 2):
            await _produce(b, "d", 4, seq, ts=clock.wall_ms())
        bases = [s.base_offset for s in p.segments]
        p.delete_records(bases[3] + 1)  # segments 0-2 go
        clock.advance(1000)
        b.expire_producers()
        b.producers.writer.drain()
        assert snap.list_offsets(p.directory) == bases[3:]
    finally:
        b.close()


async def test_clean_shutdown_snapshots_at_the_log_end(tmp_path):
    b = _small_segments(tmp_path)
    b.create_topic("s", 1)
    b.create_topic("idle", 1)
    await _produce(b, "s", 8, 0, n=3)
    b.close()
    assert snap.list_offsets(str(tmp_path / "data" / "s-0")) == [3]
    assert snap.list_offsets(str(tmp_path / "data" / "idle-0")) == []  # nothing appended
    [(pid, _e, seq, last, delta, _ts, _ce, _txn)] = snap.read(str(tmp_path / "data" / "s-0"), 3)
    assert (pid, seq, last, delta) == (8, 2, 2, 2)


# --- producer ids -------------------------------------------------------------------------

async def test_producer_id_blocks_are_reserved_ahead_off_the_event_loop(tmp_path):
    path = str(tmp_path / "producer-ids")
    writes = []

    def write(p, data):
        writes.append(threading.current_thread() is threading.main_thread())
        atomic_write(p, data)
    pids = ProducerIdAllocator(path, block=4, write=write)
    ids = [await pids.allocate()]  # the first block after a start is awaited once
    for _ in range(19):
        for _wait in range(10_000):  # InitProducerId requests arrive slower than a disk sync
            if not pids.reserving:
                break
            await asyncio.sleep(0.001)
        coro = pids.allocate()
        try:
            coro.send(None)
        except StopIteration as done:
            ids.append(done.value)
        else:
            coro.close()
            pytest.fail("allocate() waited for a block")
        with open(path) as f:
            assert int(f.read()) > ids[-1]  # durable before it is handed out
    assert ids == list(range(20))
    assert writes and not any(writes)  # every fsync ran off the event loop's thread


async def test_no_producer_id_is_handed_out_twice_after_a_crash(tmp_path):
    path = str(tmp_path / "producer-ids")
    before = ProducerIdAllocator(path, block=4)
    handed = [await before.allocate() for _ in range(6)]
    after = ProducerIdAllocator(path, block=4)  # the first one crashed, mid-block
    assert await after.allocate() > max(handed)

    calls = []

    def full_disk_after_one_block(p, data):
        calls.append(data)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        atomic_write(p, data)
    stuck = ProducerIdAllocator(path, block=4, write=full_disk_after_one_block)
    got = [await stuck.allocate() for _ in range(4)]
    with pytest.raises(OSError):  # no id beyond the durable block
        await stuck.allocate()
    with open(path) as f:
        assert max(got) < int(f.read())


@pytest.mark.timeout(10)  # before the fix, the event loop spun without yielding
async def test_a_request_between_a_block_reserved_and_its_limit_applied_gets_an_id(tmp_path):
    import concurrent.futures

    class HeldExecutor(concurrent.futures.ThreadPoolExecutor):
        """Runs the write at once; its completion reaches the loop when the test says."""
        def __init__(self):
            super().__init__(max_workers=1)
            self.held: list[concurrent.futures.Future] = []

        def submit(self, fn, /, *args, **kwargs):
            fn(*args, **kwargs)
            self.held.append(concurrent.futures.Future())
            return self.held[-1]

    ex = HeldExecutor()
    asyncio.get_running_loop().set_default_executor(ex)
    pids = ProducerIdAllocator(str(tmp_path / "producer-ids"), block=4)
    first = asyncio.ensure_future(pids.allocate())  # waits for the first block
    await asyncio.sleep(0)
    assert not first.done() and len(ex.held) == 1
    # The block's future completes in the loop's next round, which also runs the second
    # request before the callback that applies the new limit.
    ex.held[0].set_result(None)
    second = asyncio.ensure_future(pids.allocate())
    assert sorted(await asyncio.gather(first, second)) == [0, 1]
