# The log side of transactions across a SIGKILL of kafkalite (the real Kafka has its own
# recovery; these are about kafkalite's files): the LSO of an open transaction comes back
# from the producer snapshot plus the replay, and the transaction coordinator's timeout then
# aborts it so read_committed moves on; a deleted .txnindex is rebuilt by the replay.
from __future__ import annotations

import glob
import os
import uuid

from confluent_kafka import Producer

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import create_topic, eventually
from tests.integration.test_txn_log import TIMEOUT, fetch, send, txn_producer


def test_lso_survives_kill_and_the_timed_out_transaction_is_aborted(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"),
                       settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms":
                                 "500", "log.segment.bytes": "2000"})
    bp.start()
    try:
        topic = f"txr-{uuid.uuid4().hex[:6]}"
        create_topic(bp.bootstrap, topic)
        plain = Producer({"bootstrap.servers": bp.bootstrap, "linger.ms": 0})
        send(plain, topic, [b"before"])
        p = txn_producer(bp.bootstrap, f"tx-{topic}", **{"transaction.timeout.ms": 4000})
        p.begin_transaction()
        send(p, topic, [b"open"])  # offset 1: the transaction's first offset
        # Enough plain records after it to roll segments: the snapshot written at each roll
        # must carry the open transaction's first offset (current_txn_first_offset).
        for _ in range(20):  # one batch each: Kafka refuses a batch over segment.bytes
            send(plain, topic, [b"x" * 300])
        assert fetch(bp.bootstrap, topic, 0, committed=True).last_stable_offset == 1
        bp.kill()
        p.purge()  # the producer is gone with the broker; only the coordinator ends it
        bp.start()
        r = fetch(bp.bootstrap, topic, 0, committed=True)
        assert (r.last_stable_offset, r.high_watermark) == (1, 22)
        # transaction.timeout.ms passes: the coordinator aborts, the LSO moves to the end.
        r = eventually(lambda: fetch(bp.bootstrap, topic, 0, committed=True),
                       lambda r: r.last_stable_offset == r.high_watermark, timeout=TIMEOUT)
        assert r.last_stable_offset == r.high_watermark == 23
        r = fetch(bp.bootstrap, topic, 1, committed=True)
        assert [a.first_offset for a in r.aborted_transactions] == [1]
    finally:
        bp.cleanup()


def test_txnindex_rebuilt_after_deletion(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"))
    bp.start()
    try:
        topic = f"txi-{uuid.uuid4().hex[:6]}"
        create_topic(bp.bootstrap, topic)
        p = txn_producer(bp.bootstrap, f"tx-{topic}")
        for commit in (False, True, False):
            p.begin_transaction()
            send(p, topic, [b"a", b"b"])
            (p.commit_transaction if commit else p.abort_transaction)(TIMEOUT)
        want = [(a.producer_id, a.first_offset)
                for a in fetch(bp.bootstrap, topic, 0, committed=True).aborted_transactions]
        assert [o for _, o in want] == [0, 6]
        [index] = glob.glob(os.path.join(bp.data_dir, f"{topic}-0", "*.txnindex"))
        with open(index, "rb") as f:
            before = f.read()
        assert len(before) == 2 * 34  # two entries of Kafka's 34 bytes
        bp.kill()
        os.unlink(index)
        bp.start()
        got = [(a.producer_id, a.first_offset)
               for a in fetch(bp.bootstrap, topic, 0, committed=True).aborted_transactions]
        assert got == want
        with open(index, "rb") as f:
            assert f.read() == before
    finally:
        bp.cleanup()
