# The storage side of replication: leader appends stamping their epoch, follower appends
# of a leader's batches (appendAsFollower), the stored high watermark and Kafka's
# replication-offset-checkpoint. Real segment files in tmp dirs; truncation is
# test_log_truncate.py's.
from __future__ import annotations

import os
import struct

import pytest

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator.producer_state import CHECK_INTERVAL, EXPIRATION, ProducerStates
from kafkalite.coordinator.producers import PartitionProducers
from kafkalite.log import hw_checkpoint, leader_epoch
from kafkalite.log.errors import CorruptRecord, UnexpectedAppendOffset
from kafkalite.log.manager import LogManager
from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.wire.batch_builder import build_batch as build_txn_batch, build_marker
from kafkalite.wire.records import TRANSACTIONAL_BIT, parse_header, validate_produce_batch

from tests.helpers.kbatch import simple_batch, stored_form

T0 = 1_700_000_000_000


def open_log(path, name: str = "t", **cfg) -> PartitionLog:
    return PartitionLog(str(path), name, 0, LogConfig(**cfg))


def lead(p: PartitionLog, batch: bytes, epoch: int = 0) -> int:
    return p.append(batch, parse_header(batch), T0, leader_epoch=epoch)


def files(path) -> dict[str, bytes]:
    """Every segment and index file's bytes, by name."""
    out = {}
    for name in sorted(os.listdir(path)):
        if name.split(".")[-1] in ("log", "index", "timeindex", "txnindex"):
            with open(os.path.join(path, name), "rb") as f:
                out[name] = f.read()
    return out


def stored_epochs(data: bytes) -> list[tuple[int, int]]:
    """(base offset, partitionLeaderEpoch) of each whole batch in `data`."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length, epoch = struct.unpack_from(">qii", data, pos)
        if pos + 12 + length > len(data):
            break
        out.append((base, epoch))
        pos += 12 + length
    return out


def test_append_stamps_the_leader_epoch_and_learns_new_ones(tmp_path):
    p = open_log(tmp_path)
    for epoch in (0, 0, 3, 3, 5):
        lead(p, simple_batch(2, ts=T0), epoch)
    assert p.epochs.entries == [(0, 0), (3, 4), (5, 8)]
    assert stored_epochs(p.read(0, 1 << 20)) == [(0, 0), (2, 0), (4, 3), (6, 3), (8, 5)]
    p.flush()
    with open(tmp_path / leader_epoch.NAME) as f:
        assert f.read() == "0\n3\n0 0\n3 4\n5 8\n"
    p.close()
    again = open_log(tmp_path)  # a reopen keeps a replica's newer epochs (no epoch 0 at LEO)
    assert again.epochs.entries == [(0, 0), (3, 4), (5, 8)]
    again.close()


def test_append_default_epoch_is_byte_identical_to_before(tmp_path):
    p = open_log(tmp_path)
    b = simple_batch(3, ts=T0)
    p.append(b, validate_produce_batch(b, 1 << 30), T0)
    assert p.read(0, 1 << 20) == stored_form(b, 0)
    assert p.epochs.entries == [(0, 0)]
    p.close()


def leader_log(path, **cfg) -> PartitionLog:
    """A leader's log over several segments and epochs, with an aborted and a committed
    transaction and plain batches between (ABORT marker indexed as the broker does)."""
    p = open_log(path, segment_bytes=700, index_interval_bytes=150, **cfg)
    state = PartitionProducers()
    p.producer_state = state
    for i in range(12):
        epoch = 2 + i // 5
        if i in (3, 7):  # a transaction of producer 77: aborted, then committed
            data = build_txn_batch([(b"k", b"txn%d" % i)], T0 + i, producer_id=77,
                                   producer_epoch=1, attributes=TRANSACTIONAL_BIT)
            off = lead(p, data, epoch)
            state.update(77, 1, -1, 0, off, T0 + i)
            state.begin(77, off)
            marker = build_marker(77, 1, commit=i == 7, coordinator_epoch=4,
                                  timestamp_ms=T0 + i)
            m_off = lead(p, marker, epoch)
            done = state.end(77, 1, 4, m_off, T0 + i)
            if i == 3:
                p.append_aborted(77, done[0], m_off, done[1])
        else:
            lead(p, simple_batch(3, ts=T0 + 10 * i, size=40), epoch)
    return p


def replicate(leader: PartitionLog, follower: PartitionLog, state, fetch_bytes: int,
              upto: int | None = None) -> int:
    """Copy the leader's log (up to `upto`) as a follower's fetches do (reads of
    `fetch_bytes`, their cut last batch dropped), `state` attached to the follower;
    returns how many fetches it took."""
    follower.producer_state = state
    end = leader.log_end_offset if upto is None else upto
    for n in range(1, 1000):
        if follower.log_end_offset >= end:
            return n
        follower.append_replica(leader.read(follower.log_end_offset, fetch_bytes,
                                            max_offset=end))
    raise AssertionError("replication did not finish")


def test_append_replica_reproduces_the_leaders_files(tmp_path):
    leader = leader_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower", segment_bytes=700, index_interval_bytes=150)
    state = PartitionProducers()
    follower.producer_state = state
    fetches = replicate(leader, follower, state, fetch_bytes=500)
    assert fetches > 3  # several fetches, each ending in a cut batch
    assert len(leader.segments) > 3
    leader.close()
    follower.close()
    mine, theirs = files(tmp_path / "follower"), files(tmp_path / "leader")
    assert any(n.endswith(".txnindex") for n in theirs)
    assert mine == theirs
    assert follower.epochs.entries == leader.epochs.entries == [(2, 0), (3, 14), (4, 28)]
    with open(tmp_path / "follower" / leader_epoch.NAME) as f, \
            open(tmp_path / "leader" / leader_epoch.NAME) as g:
        assert f.read() == g.read()
    assert state.first_unstable is None and 77 in state.producers
    assert state.producers[77].coordinator_epoch == 4


def test_append_replica_refuses_an_overlap_and_corruption(tmp_path):
    """(Offset gaps are accepted: test_log_replication_compacted.py.)"""
    leader = open_log(tmp_path / "leader")
    for _ in range(3):
        lead(leader, simple_batch(2, ts=T0), 1)
    follower = open_log(tmp_path / "follower")
    follower.append_replica(leader.read(0, 1 << 20, max_offset=2))
    assert follower.log_end_offset == 2
    with pytest.raises(UnexpectedAppendOffset, match="overlap"):
        follower.append_replica(leader.read(0, 1 << 20))
    bad = bytearray(leader.read(2, 1 << 20))
    bad[-1] ^= 0xFF  # the last record's byte: only the CRC can tell
    with pytest.raises(CorruptRecord, match="CRC"):
        follower.append_replica(bytes(bad))
    assert follower.log_end_offset == 2  # the good first batch of `bad` was not appended
    assert follower.append_replica(b"") == []
    assert follower.append_replica(leader.read(2, 1 << 20)[:70]) == []  # partial only
    assert [h.base_offset for h in follower.append_replica(leader.read(2, 1 << 20))] == [2, 4]
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.epochs.entries == [(1, 0)]  # epoch 1 from offset 0 replaces 0
    leader.close()
    follower.close()


def test_high_watermark_follows_the_log_end_unless_replicated(tmp_path):
    p = open_log(tmp_path)
    lead(p, simple_batch(5, ts=T0))
    assert p.high_watermark == p.log_end_offset == 5
    p.replicated = True
    assert p.high_watermark == 0
    assert p.update_high_watermark(3) is True
    assert p.update_high_watermark(3) is False
    assert p.high_watermark == 3
    assert p.update_high_watermark(99) and p.high_watermark == 5  # clamped to the log end
    lead(p, simple_batch(5, ts=T0))
    assert p.high_watermark == 5 and p.log_end_offset == 10
    p.delete_records(4)
    assert p.update_high_watermark(1) is True and p.high_watermark == 4  # not below start
    assert p.update_high_watermark(2) is False
    p.close()


def test_last_stable_offset_stays_at_or_below_the_high_watermark(tmp_path):
    p = open_log(tmp_path)
    state = PartitionProducers()
    p.producer_state = state
    lead(p, simple_batch(4, ts=T0))
    p.replicated = True
    p.update_high_watermark(2)
    assert p.last_stable_offset == 2
    state.begin(9, 3)  # a transaction open from offset 3, above the high watermark
    assert p.last_stable_offset == 2
    p.update_high_watermark(4)
    assert p.last_stable_offset == 3
    p.close()


def manager(path) -> LogManager:
    m = LogManager(BrokerConfig({"log.dirs": str(path)}))
    m.open()
    return m


def test_high_watermark_checkpoint_round_trip(tmp_path):
    m = manager(tmp_path)
    t = m.create_topic("hw", 3)
    for p in t.partitions:
        for _ in range(p.partition + 2):
            lead(p, simple_batch(2, ts=T0))
    t.partitions[0].replicated = True
    t.partitions[2].replicated = True
    t.partitions[0].update_high_watermark(3)
    t.partitions[2].update_high_watermark(5)
    m.checkpoint_high_watermarks().result()
    path = tmp_path / hw_checkpoint.NAME
    assert path.read_bytes() == b"0\n2\nhw 0 3\nhw 2 5\n"
    t.partitions[2].update_high_watermark(7)
    m.close()  # a clean close writes it again
    assert path.read_bytes() == b"0\n2\nhw 0 3\nhw 2 7\n"
    m = manager(tmp_path)
    try:
        ps = m.get("hw").partitions
        for p in ps:
            p.replicated = True
        assert [p.high_watermark for p in ps] == [3, 0, 7]  # absent: the log start
    finally:
        m.close()


# Above the log end: clamped to it. Malformed (2 entries announced, 1 there): ignored, the
# high watermark starts at the log start.
@pytest.mark.parametrize("text, hw", [(b"0\n1\nhw 0 40\n", 4), (b"0\n2\nhw 0 3\n", 0)])
def test_a_checkpoint_read_at_open_is_checked(tmp_path, text, hw):
    m = manager(tmp_path)
    p = m.create_topic("hw", 1).partitions[0]
    lead(p, simple_batch(4, ts=T0))
    m.close()
    (tmp_path / hw_checkpoint.NAME).write_bytes(text)
    m = manager(tmp_path)
    try:
        p = m.get("hw").partitions[0]
        p.replicated = True
        assert p.high_watermark == hw
    finally:
        m.close()


def test_no_checkpoint_without_replicated_partitions(tmp_path):
    m = manager(tmp_path)
    lead(m.create_topic("single", 1).partitions[0], simple_batch(1, ts=T0))
    assert m.checkpoint_high_watermarks() is None
    m.close()
    assert not (tmp_path / hw_checkpoint.NAME).exists()


def test_checkpoint_file_is_byte_identical_to_kafkas(tmp_path):
    """A Kafka 3.8 broker's replication-offset-checkpoint for a topic of one partition
    with 5 records, against ours for the same."""
    from kafka import KafkaProducer

    from tests.helpers.real_kafka import RealKafka, create_topic, unavailable_reason
    if unavailable_reason() is not None:
        pytest.skip(unavailable_reason())
    kafka = RealKafka(data_dir=str(tmp_path / "kafka"))
    try:
        kafka.start()
        create_topic(kafka.bootstrap, "hwt")
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
        for i in range(5):
            producer.send("hwt", b"v%d" % i)
        producer.flush()
        producer.close()
        kafka.stop()
        theirs = (tmp_path / "kafka" / "kraft-logs" / hw_checkpoint.NAME).read_bytes()
    finally:
        kafka.cleanup()
    m = manager(tmp_path / "ours")
    p = m.create_topic("hwt", 1).partitions[0]
    lead(p, simple_batch(5, ts=T0))
    p.replicated = True
    p.update_high_watermark(5)
    m.close()
    assert (tmp_path / "ours" / hw_checkpoint.NAME).read_bytes() == theirs


def test_a_diverged_follower_truncates_to_the_epoch_end_and_follows_the_new_leader(tmp_path):
    """The follower took batches of epoch 1 the new leader (epoch 2) never had: it cuts
    its log where the leader's epoch 1 ends (OffsetForLeaderEpoch) and appends the new
    leader's batches, ending with the leader's exact files."""
    old = open_log(tmp_path / "old", segment_bytes=400)
    for _ in range(6):
        lead(old, simple_batch(2, ts=T0, size=30), 1)
    follower = open_log(tmp_path / "follower", segment_bytes=400)
    replicate(old, follower, PartitionProducers(), 1 << 20)
    new = open_log(tmp_path / "new", segment_bytes=400)
    replicate(old, new, PartitionProducers(), 1 << 20, upto=6)  # 3 batches of epoch 1
    for _ in range(5):
        lead(new, simple_batch(3, ts=T0 + 5, size=20), 2)
    epoch, end = new.epochs.end_offset_for(follower.epochs.latest_epoch, new.log_end_offset)
    assert (epoch, end) == (1, 6)
    follower.truncate_to(end)
    assert follower.epochs.entries == [(1, 0)]
    replicate(new, follower, PartitionProducers(), fetch_bytes=1 << 20)
    assert follower.epochs.entries == new.epochs.entries == [(1, 0), (2, 6)]
    for p in (old, new, follower):
        p.close()
    assert files(tmp_path / "follower") == files(tmp_path / "new")


def test_an_open_transaction_replicated_holds_the_follower_lso(tmp_path):
    leader = leader_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower", segment_bytes=700, index_interval_bytes=150)
    state = PartitionProducers()
    follower.producer_state = state
    follower.replicated = True
    # up to the committed transaction's data batch (20), without its marker (21)
    replicate(leader, follower, state, 1 << 20, upto=21)
    assert state.first_unstable == 20
    follower.update_high_watermark(21)
    assert follower.last_stable_offset == 20
    assert follower.collect_aborted(0, 21) == leader.collect_aborted(0, 21) != []
    leader.close()
    follower.close()


def test_each_roll_inside_one_replicated_fetch_snapshots_the_state_before_it(tmp_path):
    """One fetch of 4 batches, a transaction opened by the second, the follower rolling
    before each: its producer snapshots at the rolls hold the open transaction, so a
    restart (snapshot + replay of the tail) finds it open, as the leader has it."""
    leader = open_log(tmp_path / "leader")
    lead(leader, simple_batch(3, ts=T0))
    lead(leader, build_txn_batch([(b"k", b"t")], T0, producer_id=77, producer_epoch=1,
                                 attributes=TRANSACTIONAL_BIT))
    lead(leader, simple_batch(3, ts=T0))
    lead(leader, simple_batch(3, ts=T0))
    states = ProducerStates({EXPIRATION: 86_400_000, CHECK_INTERVAL: 600_000},
                            FakeClock(wall_start_ms=T0))
    follower = open_log(tmp_path / "follower", segment_bytes=100)
    states.attach(follower)
    assert len(follower.append_replica(leader.read(0, 1 << 20))) == 4
    assert len(follower.segments) == 4
    states.writer.close()
    assert follower.producer_state.first_unstable == 3
    follower.close()
    again = open_log(tmp_path / "follower", segment_bytes=100)
    states = ProducerStates({EXPIRATION: 86_400_000, CHECK_INTERVAL: 600_000},
                            FakeClock(wall_start_ms=T0))
    states.load(again)
    assert again.producer_state.first_unstable == 3
    assert again.last_stable_offset == 3
    states.writer.close()
    leader.close()
    again.close()
