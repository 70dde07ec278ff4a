# The log side's transaction state machines on their own: ongoing transactions and the LSO in
# the producer state (with its snapshot), Kafka's .txnindex, and reads bounded by the LSO.
from __future__ import annotations

import pytest

from kafkalite.coordinator import producer_snapshot as snap
from kafkalite.coordinator.producers import PartitionProducers
from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.log.txnindex import AbortedTxn, TxnIndex
from kafkalite.wire.batch_builder import build_batch, build_marker, marker_type
from kafkalite.wire.errors import ErrorCode, KafkaError
from kafkalite.wire.records import TRANSACTIONAL_BIT, parse_header

DAY = 86_400_000


def test_ongoing_transactions_give_the_lso_and_markers_end_them():
    st = PartitionProducers()
    assert st.first_unstable is None
    st.update(1, 0, 0, 1, 10, 100)
    st.begin(1, 10)
    st.update(2, 0, 0, 0, 12, 100)
    st.begin(2, 12)
    st.begin(1, 13)  # a later batch of an open transaction changes nothing
    assert (st.ongoing, st.first_unstable) == ({1: 10, 2: 12}, 10)
    with pytest.raises(KafkaError) as e:
        st.check_not_in_txn(1)
    assert e.value.code == ErrorCode.invalid_txn_state
    # Producer 1 aborts at 14: its entry's LSO is producer 2's first offset (Kafka's rule).
    assert st.end(1, 0, 3, 14, 200) == (10, 12)
    assert (st.first_unstable, st.producers[1].coordinator_epoch) == (12, 3)
    assert st.end(1, 0, 3, 15, 200) is None  # a repeated marker: nothing was open
    assert st.end(2, 0, 3, 16, 200) == (12, 17)  # none left open: the marker's offset + 1
    assert st.first_unstable is None and st.ongoing == {}
    st.check_not_in_txn(1)


def test_a_marker_with_a_bumped_epoch_restarts_sequences_and_an_old_epoch_is_refused():
    st = PartitionProducers()
    st.update(5, 0, 0, 4, 0, 100)
    st.begin(5, 0)
    st.end(5, 1, 0, 5, 100)  # the coordinator's abort after a timeout bumps the epoch
    assert st.producers[5].epoch == 1 and st.producers[5].last_seq == -1
    assert st.check(5, 1, 0, 0) is None
    with pytest.raises(KafkaError) as e:
        st.check_marker(5, 0)
    assert e.value.code == ErrorCode.invalid_producer_epoch


def test_snapshot_keeps_the_open_transaction_and_expiry_spares_it():
    st = PartitionProducers()
    st.update(7, 2, 0, 0, 40, timestamp=0)
    st.begin(7, 40)
    st.update(8, 0, 0, 0, 41, timestamp=0)
    entries = snap.decode(st.snapshot())
    assert sorted((e[0], e[7]) for e in entries) == [(7, 40), (8, -1)]
    back = PartitionProducers()
    back.restore(entries, now_ms=2 * DAY, expiration_ms=DAY)  # both are past expiry
    assert (list(back.producers), back.ongoing, back.first_unstable) == ([7], {7: 40}, 40)
    assert back.expire(3 * DAY, DAY) == 0  # an open transaction keeps its producer


def test_txnindex_collects_like_kafka_and_truncates(tmp_path):
    idx = TxnIndex(str(tmp_path / "00000000000000000000.txnindex"))
    assert not idx.exists and idx.sync_handle() is None
    a, b = AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)  # b was open at a's end
    idx.append(a)
    idx.append(b)
    idx.append(b)  # the replay meeting an entry that survived: nothing added
    assert (tmp_path / "00000000000000000000.txnindex").stat().st_size == 68
    assert TxnIndex(idx.path).entries() == [a, b]
    assert idx.collect(0, 4) == ([a, b], True)  # b's LSO 10 reaches the bound 4
    assert idx.collect(6, 20) == ([b], False)  # later segments may hold more
    idx.truncate_to(9)
    assert TxnIndex(idx.path).entries() == [a]


def _txn_batch(pid: int, n: int) -> bytes:
    raw = bytearray(build_batch([(None, b"v")] * n, 1000, producer_id=pid, producer_epoch=0,
                                attributes=TRANSACTIONAL_BIT))
    return bytes(raw)


def test_read_stops_at_the_lso(tmp_path):
    p = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig())
    st = PartitionProducers()
    p.producer_state = st
    plain = build_batch([(None, b"p")] * 3, 1000)
    p.append(plain, parse_header(plain))
    txn = _txn_batch(9, 2)
    st.begin(9, p.append(txn, parse_header(txn)))
    assert (p.last_stable_offset, p.high_watermark) == (3, 5)
    assert p.read(0, 1 << 20, max_offset=3) == p.read(0, len(plain))
    assert p.read(3, 1 << 20, max_offset=3) == b""
    assert len(p.read(0, 1 << 20)) == len(plain) + len(txn)
    marker = build_marker(9, 0, False, 0, 1000)
    assert marker_type(marker) == 0 and marker_type(build_marker(9, 0, True, 0, 1)) == 1
    off = p.append(marker, parse_header(marker))
    first, lso = st.end(9, 0, 0, off, 1000)
    p.append_aborted(9, first, off, lso)
    assert (p.last_stable_offset, p.collect_aborted(0, 6)) == (6, [AbortedTxn(9, 3, 5, 6)])
    p.close()
