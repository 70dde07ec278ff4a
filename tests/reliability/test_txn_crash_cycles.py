# The broker SIGKILLed again and again under transactional load, many kills landing while
# an EndTxn is in flight. Worker threads, each a confluent-kafka transactional producer of
# its own transactional.id, write transactions of known content (a few records over the
# partitions of one topic) and commit or abort them at random, recovering as librdkafka's
# documentation says: retry a retriable error, abort after an abortable one, a new producer
# (whose init_transactions ends what the old one left) after a fatal one. The broker is
# killed (SIGKILL) and restarted on the same data directory CYCLES times, half the kills just
# after a worker entered commit_transaction()/abort_transaction(); each restart must be
# followed by new transactions ending before the next kill. After the last restart the
# workers finish and:
#   - a read_committed consumer sees every transaction whose commit_transaction() returned,
#     each record exactly once; no record of a transaction that was aborted or never
#     committed; a transaction whose commit raised (its outcome unknown to the client) all
#     or nothing;
#   - ListTransactions/DescribeTransactions show no transaction in Ongoing or Prepare*;
#   - every partition's last stable offset equals its high watermark.
# Bounded in CI (5 cycles); 120 behind KAFKALITE_LONG=1.
from __future__ import annotations

import collections
import glob
import os
import random
import re
import threading
import time
import uuid

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import create_topic, eventually, free_port_pair
from tests.integration.test_txn_coordinator_wire import Wire
from tests.integration.test_txn_log import fetch

PARTITIONS = 3
WORKERS = 3
CALL_TIMEOUT_S = 10.0
RECOVERY_S = 60.0  # a worker's bound for one operation, across restarts
PROGRESS_TIMEOUT_S = 90.0
SETTINGS = {
    "log.segment.bytes": "16384",  # rolls: snapshots and .txnindex files of several segments
    "transaction.state.log.num.partitions": "4",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
CLIENT = {
    "linger.ms": 2,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "transaction.timeout.ms": 60000,
    "log_level": 0,  # each kill makes every client log its disconnections
}


class Worker(threading.Thread):
    """One transactional.id's producer loop; `fate` maps each transaction to committed,
    aborted or uncertain (commit raised), `values` to its records."""

    def __init__(self, idx: int, bootstrap: str, topic: str, seed: int, stop: threading.Event):
        super().__init__(name=f"txn-worker-{idx}", daemon=True)
        self.idx, self.bootstrap, self.topic, self.stop = idx, bootstrap, topic, stop
        self.rnd = random.Random(seed * 100 + idx)
        self.txn_id = f"crash-{topic}-{idx}"
        self.values: dict[str, list[bytes]] = {}
        self.fate: dict[str, str] = {}
        self.ended = 0  # transactions whose commit/abort returned
        self.ending = False  # inside commit_transaction()/abort_transaction()
        self.new_producers = 0
        self.error: BaseException | None = None

    def _producer(self):
        from confluent_kafka import KafkaException, Producer
        self.new_producers += 1
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                      **CLIENT})
        self._retry(p.init_transactions, KafkaException)
        return p

    @staticmethod
    def _retry(call, exc_type) -> None:
        deadline = time.monotonic() + RECOVERY_S
        while True:
            try:
                call(CALL_TIMEOUT_S)
                return
            except exc_type as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # reported by the test, with the worker's name
            self.error = e

    def _loop(self) -> None:
        from confluent_kafka import KafkaException
        p = self._producer()
        n = 0
        while not self.stop.is_set():
            name = f"w{self.idx}-t{n}"
            n += 1
            values = [f"{name}-r{k}".encode() for k in range(self.rnd.randint(1, 6))]
            self.values[name], self.fate[name] = values, "aborted"
            commit = self.rnd.random() < 0.6
            try:
                p.begin_transaction()
                for v in values:
                    p.produce(self.topic, v, partition=self.rnd.randrange(PARTITIONS))
                if commit:
                    self.fate[name] = "uncertain"
                self.ending = True
                self._retry(p.commit_transaction if commit else p.abort_transaction,
                            KafkaException)
                self.fate[name] = "committed" if commit else "aborted"
                self.ended += 1
            except KafkaException as e:
                if e.args[0].txn_requires_abort():
                    try:
                        self._retry(p.abort_transaction, KafkaException)
                        self.fate[name] = "aborted"  # the client was told it is aborted
                        continue
                    except KafkaException:
                        pass
                # fatal (or a bound ran out): a new producer ends what this one left
                p = self._producer()
            finally:
                self.ending = False


def read_committed(bootstrap: str, topic: str, ends: dict[int, int]) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True, "log_level": 0})
    c.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if not m.error():
                    out.append(m.value())
            at = {t.partition: t.offset for t in c.position(
                [TopicPartition(topic, i) for i in range(PARTITIONS)])}
            if all(at[i] >= ends[i] for i in range(PARTITIONS)):
                break
        return out
    finally:
        c.close()


def txn_state_bytes(data_dir: str) -> int:
    return sum(os.path.getsize(f) for f in glob.glob(f"{data_dir}/__transaction_state-*/*.log"))


def unfinished(bootstrap: str, txn_ids: list[str]) -> list[tuple[str, str]]:
    """(transactional id, state) of every transaction not in a complete state, as
    ListTransactions and DescribeTransactions show them."""
    w = Wire(bootstrap)
    try:
        listed = w.list().transaction_states
        shown = [(t.transactional_id, t.transaction_state) for t in listed]
        shown += [(i, w.describe(i).transaction_state) for i in txn_ids]
    finally:
        w.close()
    return [(i, s) for i, s in shown if s not in ("Empty", "CompleteCommit", "CompleteAbort")]


def run_cycles(tmp: str, cycles: int, seed: int, fsync: bool) -> dict:
    rnd = random.Random(seed)
    bp = BrokerProcess(data_dir=f"{tmp}/data", port=free_port_pair(),
                       settings={**SETTINGS, "kafkalite.fsync.before.ack": str(fsync).lower()})
    bp.start()
    stop = threading.Event()
    workers: list[Worker] = []
    stats = collections.Counter()
    try:
        topic = f"txc-{uuid.uuid4().hex[:6]}"
        create_topic(bp.bootstrap, topic, partitions=PARTITIONS)
        workers = [Worker(i, bp.bootstrap, topic, seed, stop) for i in range(WORKERS)]
        for w in workers:
            w.start()

        def await_progress(cycle: int) -> None:
            before = sum(w.ended for w in workers)
            ok = eventually(lambda: sum(w.ended for w in workers), lambda n: n > before + 1,
                            timeout=PROGRESS_TIMEOUT_S, interval=0.02)
            dead = [f"{w.name}: {w.error!r}" for w in workers if w.error is not None]
            assert not dead and ok > before + 1, (
                f"no transaction ended after restart {cycle}: {dead}\n{bp.read_log()[-3000:]}")

        await_progress(0)
        for cycle in range(1, cycles + 1):
            time.sleep(rnd.uniform(0.05, 0.5))
            if cycle % 3:
                # Just after a worker began to end its transaction, and (bounded) after the
                # next write to __transaction_state: likely its Prepare*, whose markers and
                # Complete* are still to be written.
                eventually(lambda: any(w.ending for w in workers), bool, timeout=10,
                           interval=0.001)
                size = txn_state_bytes(bp.data_dir)
                eventually(lambda: txn_state_bytes(bp.data_dir), lambda n: n > size,
                           timeout=2, interval=0)
            stats["kills_with_end_txn_in_flight"] += any(w.ending for w in workers)
            bp.kill()
            bp.start(timeout=30)
            await_progress(cycle)
        stop.set()
        for w in workers:
            w.join(RECOVERY_S * 3)
        assert not any(w.is_alive() for w in workers), "a worker did not finish"
        dead = [f"{w.name}: {w.error!r}" for w in workers if w.error is not None]
        assert not dead, dead

        left = eventually(lambda: unfinished(bp.bootstrap, [w.txn_id for w in workers]),
                          lambda u: not u, timeout=30)
        assert not left, f"transactions not completed: {left}"
        parts = [eventually(lambda i=i: fetch(bp.bootstrap, topic, 0, True, partition=i),
                            lambda r: r.last_stable_offset == r.high_watermark, timeout=30)
                 for i in range(PARTITIONS)]
        assert [r.last_stable_offset for r in parts] == [r.high_watermark for r in parts]
        seen = collections.Counter(read_committed(
            bp.bootstrap, topic, {i: r.high_watermark for i, r in enumerate(parts)}))

        fate = {k: v for w in workers for k, v in w.fate.items()}
        values = {k: v for w in workers for k, v in w.values.items()}
        known = {v for vs in values.values() for v in vs}
        stats["cycles"] = cycles
        stats["duplicated"] = sum(1 for n in seen.values() if n > 1)
        stats["unknown"] = sum(1 for v in seen if v not in known)
        for name, state in fate.items():
            visible = [seen[v] for v in values[name]]
            stats[f"txn_{state}"] += 1
            if state == "committed":
                stats["lost"] += sum(1 for n in visible if n == 0)
            elif state == "aborted":
                stats["aborted_visible"] += sum(1 for n in visible if n)
            else:
                stats["uncertain_partial"] += 0 < sum(1 for n in visible if n) < len(visible)
                stats["uncertain_visible"] += all(visible)
        stats["new_producers"] = sum(w.new_producers for w in workers) - WORKERS
        broker_log = bp.read_log()
        at = broker_log.find("Traceback")
        assert at < 0, broker_log[max(0, at - 1500):at + 3000]
        # restarts whose load found a transaction between Prepare* and Complete*: the kill
        # landed inside an EndTxn, and the markers were written at load
        stats["loads_completing_prepared"] = sum(
            1 for n in re.findall(r"\((\d+) to complete\)", broker_log) if int(n))
        return dict(stats)
    finally:
        stop.set()
        for w in workers:
            w.join(5)
        bp.cleanup()


def check(r: dict, cycles: int, long: bool = False) -> None:
    print(f"\ntxn crash cycles: {r}")
    assert r["cycles"] == cycles
    assert r.get("lost", 0) == r.get("duplicated", 0) == r.get("unknown", 0) == 0, r
    assert r.get("aborted_visible", 0) == 0 and r.get("uncertain_partial", 0) == 0, r
    assert r["txn_committed"] > 0 and r["txn_aborted"] > 0, r  # both kinds really ran
    assert r["kills_with_end_txn_in_flight"] >= cycles // 2, r
    if long:  # a few cycles may all miss the window between Prepare* and Complete*
        assert r["loads_completing_prepared"] > 0, r


@pytest.mark.parametrize("fsync", [False, True], ids=["page-cache", "fsync-before-ack"])
def test_txn_sigkill_cycles(tmp_path, fsync: bool) -> None:
    check(run_cycles(str(tmp_path), cycles=5, seed=5, fsync=fsync), 5)


@pytest.mark.long
@pytest.mark.parametrize("fsync", [False, True], ids=["page-cache", "fsync-before-ack"])
def test_txn_sigkill_cycles_long(tmp_path, fsync: bool) -> None:
    check(run_cycles(str(tmp_path), cycles=120, seed=120, fsync=fsync), 120, long=True)
