# The transaction coordinator's state machine on a fake clock, driven directly (no sockets),
# writing to a real __transaction_state in a temporary directory as the broker builds it; the
# marker writer is a recording stand-in (the log side's own is tested with the log).
# Every transition, fencing (a new instance, KIP-360 bumps, epoch exhaustion),
# CONCURRENT_TRANSACTIONS while a transaction completes, the timeout abort with its epoch bump,
# expiration, marker retries, and replay after a restart (Ongoing stays Ongoing and times out;
# a prepared transaction is completed).
from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator.transactions import TxnState as S
from kafkalite.coordinator.transactions_coordinator import TransactionCoordinator
from kafkalite.log.manager import LogManager

ABORT_CHECK = 10_000
TP = [("t", 0), ("t", 1)]


class Markers:
    """Records write_markers calls; `fail` makes them fail, `gate` holds them."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, pid, epoch, coord_epoch, commit, partitions):
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError("disk gone")
        self.calls.append((pid, epoch, coord_epoch, commit, list(partitions)))
        return {tp: E.none for tp in partitions}


class Harness:
    def __init__(self, tmp_path: Path, clock: FakeClock | None = None, **settings: str):
        self.tmp_path, self.settings = tmp_path, settings
        self.clock = clock or FakeClock()
        self.markers = Markers()
        self.pids = itertools.count(1000)
        self.open()

    def open(self) -> None:
        self.config = BrokerConfig({"log.dirs": str(self.tmp_path / "data"),
                                    "transaction.state.log.num.partitions": "3",
                                    **self.settings})
        self.logs = LogManager(self.config)
        self.logs.open()

        async def allocate() -> int:
            return next(self.pids)
        self.coord = TransactionCoordinator(self.config, self.logs, self.logs.create_topic,
                                            clock=self.clock, allocate_pid=allocate,
                                            write_markers=self.markers)
        self.coord.open()

    def restart(self) -> None:
        self.coord.close()
        self.logs.close()
        self.open()

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def tick(self, advance_ms: int) -> None:
        self.clock.advance(advance_ms)
        self.coord.tick(self.clock.monotonic_ms())
        await self.settle()


@pytest.fixture
def make(tmp_path):
    made: list[Harness] = []

    def factory(**settings: str) -> Harness:
        made.append(Harness(tmp_path, **settings))
        return made[-1]
    yield factory
    for h in made:
        h.coord.close()
        h.logs.close()


@pytest.fixture
def h(make):
    return make()


async def begin(h, txn="tx", timeout=60000, parts=TP):
    err, pid, epoch = await h.coord.init_producer_id(txn, timeout, None)
    assert err == E.none
    assert await h.coord.add_partitions(txn, pid, epoch, parts) == E.none
    return pid, epoch


async def test_init_then_reinit_bumps_the_epoch(h):
    err, pid, epoch = await h.coord.init_producer_id("tx", 60000, None)
    assert (err, epoch) == (E.none, 0)
    meta = h.coord.txns["tx"]
    assert meta.state == S.EMPTY and meta.start_ms == -1
    assert await h.coord.init_producer_id("tx", 30000, None) == (E.none, pid, 1)
    assert meta.timeout_ms == 30000
    assert h.logs.get("__transaction_state") is not None


@pytest.mark.parametrize("timeout", [0, -1, 900001])
async def test_timeout_out_of_bounds(h, timeout):
    assert await h.coord.init_producer_id("tx", timeout, None) == (
        E.invalid_transaction_timeout, -1, -1)
    assert (await h.coord.init_producer_id("", 1000, None))[0] == E.invalid_request


async def test_commit_writes_markers_then_completes(h):
    pid, epoch = await begin(h)
    meta = h.coord.txns["tx"]
    assert meta.state == S.ONGOING and meta.start_ms == h.clock.wall_ms()
    assert h.coord.verify_partition(pid, epoch, "t", 0) == E.none
    assert h.coord.verify_partition(pid, epoch, "t", 5) == E.invalid_txn_state
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.none
    assert h.markers.calls == [(pid, epoch, 0, True, TP)]
    assert meta.state == S.COMPLETE_COMMIT and meta.partitions == set()
    assert h.coord.committed == 1
    # Retries of the same outcome succeed; the other outcome is INVALID_TXN_STATE.
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.none
    assert await h.coord.end_txn("tx", pid, epoch, False) == E.invalid_txn_state
    assert h.coord.verify_partition(pid, epoch, "t", 0) == E.invalid_txn_state
    # The next transaction starts from CompleteCommit.
    assert await h.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == E.none
    assert await h.coord.end_txn("tx", pid, epoch, False) == E.none
    assert meta.state == S.COMPLETE_ABORT and h.coord.aborted == 1


async def test_end_without_transaction_and_wrong_producer(h):
    err, pid, epoch = await h.coord.init_producer_id("tx", 60000, None)
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.invalid_txn_state
    assert await h.coord.end_txn("nope", pid, epoch, True) == E.invalid_producer_id_mapping
    assert await h.coord.end_txn("tx", pid + 1, epoch, True) == E.invalid_producer_id_mapping
    assert await h.coord.end_txn("tx", pid, epoch + 1, True) == E.producer_fenced
    assert await h.coord.add_partitions("tx", pid, epoch - 1, TP) == E.producer_fenced
    assert await h.coord.add_partitions("nope", pid, epoch, TP) == E.invalid_producer_id_mapping


async def test_new_instance_aborts_the_open_transaction_and_fences_the_old(h):
    pid, epoch = await begin(h)
    # The new instance: the open transaction is aborted with epoch+1, CONCURRENT_TRANSACTIONS.
    assert await h.coord.init_producer_id("tx", 60000, None) == (
        E.concurrent_transactions, -1, -1)
    assert h.markers.calls == [(pid, epoch + 1, 0, False, TP)]
    assert h.coord.txns["tx"].state == S.COMPLETE_ABORT
    # Its retry gets epoch+2; the old instance is fenced everywhere.
    assert await h.coord.init_producer_id("tx", 60000, None) == (E.none, pid, epoch + 2)
    assert await h.coord.add_partitions("tx", pid, epoch, TP) == E.producer_fenced
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.producer_fenced
    assert h.coord.verify_partition(pid, epoch, "t", 0) == E.invalid_producer_epoch
    assert h.coord.verify("tx", pid, epoch, TP) == {tp: E.producer_fenced for tp in TP}


async def test_kip360_bump_retry_and_fencing(h):
    err, pid, epoch = await h.coord.init_producer_id("tx", 60000, None)
    # A producer recovering with its current (id, epoch): bumped, last epoch remembered.
    assert await h.coord.init_producer_id("tx", 60000, (pid, epoch)) == (E.none, pid, 1)
    # The same request retried (its answer lost): the same epoch again, no second bump.
    assert await h.coord.init_producer_id("tx", 60000, (pid, epoch)) == (E.none, pid, 1)
    # Another producer id, or an epoch neither current nor last: fenced.
    assert (await h.coord.init_producer_id("tx", 60000, (pid + 7, 1)))[0] == E.producer_fenced
    await h.coord.init_producer_id("tx", 60000, None)  # epoch 2, last epoch forgotten
    assert (await h.coord.init_producer_id("tx", 60000, (pid, 0)))[0] == E.producer_fenced


async def test_exhausted_epoch_rotates_the_producer_id(h):
    err, pid, _ = await h.coord.init_producer_id("tx", 60000, None)
    meta = h.coord.txns["tx"]
    meta.producer_epoch = 32766  # Short.MAX_VALUE - 1: exhausted
    err, new_pid, epoch = await h.coord.init_producer_id("tx", 60000, None)
    assert (err, epoch) == (E.none, 0) and new_pid != pid
    assert meta.last_producer_id == pid
    assert h.coord.by_pid[new_pid] is meta and pid not in h.coord.by_pid


async def test_concurrent_transactions_while_markers_are_written(h):
    pid, epoch = await begin(h)
    h.markers.gate = asyncio.Event()
    ending = asyncio.ensure_future(h.coord.end_txn("tx", pid, epoch, True))
    await h.settle()
    meta = h.coord.txns["tx"]
    assert meta.state == S.PREPARE_COMMIT
    assert await h.coord.add_partitions("tx", pid, epoch, TP) == E.concurrent_transactions
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.concurrent_transactions
    assert await h.coord.end_txn("tx", pid, epoch, False) == E.invalid_txn_state
    assert (await h.coord.init_producer_id("tx", 60000, None))[0] == E.concurrent_transactions
    assert h.coord.verify_partition(pid, epoch, "t", 0) == E.concurrent_transactions
    h.markers.gate.set()
    assert await ending == E.none
    assert meta.state == S.COMPLETE_COMMIT


async def test_failed_markers_are_retried_by_tick(h):
    pid, epoch = await begin(h)
    h.markers.fail = True
    assert await h.coord.end_txn("tx", pid, epoch, False) == E.none  # Prepare is durable
    meta = h.coord.txns["tx"]
    assert meta.state == S.PREPARE_ABORT
    await h.tick(ABORT_CHECK)
    assert meta.state == S.PREPARE_ABORT
    h.markers.fail = False
    await h.tick(ABORT_CHECK)
    assert meta.state == S.COMPLETE_ABORT
    assert h.markers.calls == [(pid, epoch, 0, False, TP)]


async def test_timed_out_transaction_is_aborted_with_a_bumped_epoch(h):
    pid, epoch = await begin(h, timeout=15000)
    meta = h.coord.txns["tx"]
    await h.tick(ABORT_CHECK)  # 10 s: not yet
    assert meta.state == S.ONGOING
    h.clock.step_wall(10**9)  # a wall-clock step fires nothing
    await h.tick(5000)  # 15 s: the check runs at 20 s, and the deadline is strict
    assert meta.state == S.ONGOING
    await h.tick(5000)
    assert meta.state == S.COMPLETE_ABORT
    assert h.markers.calls == [(pid, epoch + 1, 0, False, TP)]
    assert meta.producer_epoch == epoch + 1
    # The zombie is fenced; a new instance gets epoch + 2.
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.producer_fenced
    assert await h.coord.init_producer_id("tx", 60000, None) == (E.none, pid, epoch + 2)


async def test_idle_id_expires(make):
    h = make(**{"transactional.id.expiration.ms": "100000",
                             "transaction.remove.expired.transaction.cleanup.interval.ms":
                             "50000"})
    pid, epoch = await begin(h, "a")
    await h.coord.init_producer_id("b", 60000, None)
    await h.tick(150000)  # one check, at 150 s: "a" is Ongoing, so it never expires
    assert set(h.coord.txns) == {"a"}
    assert h.coord.describe("b") == (E.transactional_id_not_found, None)
    h.restart()  # the tombstone holds
    await h.settle()
    assert set(h.coord.txns) == {"a"}


async def test_list_and_describe_filters(h):
    pid, _ = await begin(h, "a")
    await h.coord.init_producer_id("b", 60000, None)
    err, found, unknown = h.coord.list([], ["Ongoing", "Bogus"])
    assert (err, [m.transactional_id for m in found], unknown) == (E.none, ["a"], ["Bogus"])
    assert [m.transactional_id for m in h.coord.list([pid], [])[1]] == ["a"]
    assert {m.transactional_id for m in h.coord.list([], [])[1]} == {"a", "b"}
    h.clock.advance(5000)
    # As Kafka 3.8 computes it: an id with no transaction (start -1) passes any duration.
    assert {m.transactional_id for m in h.coord.list([], [], 4000)[1]} == {"a", "b"}
    assert [m.transactional_id for m in h.coord.list([], [], 5000)[1]] == ["b"]
    assert h.coord.describe("") == (E.invalid_request, None)
    err, meta = h.coord.describe("a")
    assert (err, meta.state, meta.partitions) == (E.none, S.ONGOING, set(TP))


async def test_restart_mid_transaction_keeps_it_ongoing_until_it_times_out(h):
    pid, epoch = await begin(h, timeout=30000)
    h.clock.advance(20000)
    h.restart()
    await h.settle()
    meta = h.coord.txns["tx"]
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.partitions) == (
        S.ONGOING, pid, epoch, set(TP))
    assert h.coord.verify_partition(pid, epoch, "t", 1) == E.none
    await h.tick(ABORT_CHECK)  # 30 s since the start: not past it yet
    assert meta.state == S.ONGOING
    await h.tick(ABORT_CHECK)
    assert meta.state == S.COMPLETE_ABORT
    assert h.markers.calls == [(pid, epoch + 1, 0, False, TP)]


async def test_prepared_transaction_is_completed_after_restart(h):
    pid, epoch = await begin(h)
    h.markers.fail = True  # "crash" between the Prepare record and the markers
    assert await h.coord.end_txn("tx", pid, epoch, True) == E.none
    h.markers.fail = False
    h.restart()
    await h.settle()
    meta = h.coord.txns["tx"]
    assert meta.state == S.COMPLETE_COMMIT
    assert h.markers.calls == [(pid, epoch, 0, True, TP)]
    h.restart()
    await h.settle()
    assert h.coord.txns["tx"].state == S.COMPLETE_COMMIT


async def test_load_in_progress_answers(h):
    await begin(h)
    h.coord.close()
    h.logs.close()
    h.open()  # inside the loop: the replay runs in the background
    assert h.coord.loading
    assert (await h.coord.init_producer_id("tx", 60000, None))[0] == \
        E.coordinator_load_in_progress
    assert h.coord.list([], [])[0] == E.coordinator_load_in_progress
    await h.settle()
    assert not h.coord.loading and h.coord.txns["tx"].state == S.ONGOING


async def test_metrics_count_open_committed_aborted(tmp_path):
    from kafkalite.broker.broker import Broker
    from kafkalite.metrics import render

    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path / "b"),
                                  "transaction.state.log.num.partitions": "1"}), FakeClock())
    broker.open()
    markers = Markers()
    broker.transactions.write_markers = markers
    try:
        c = broker.transactions
        for txn, commit in (("a", True), ("b", False), ("c", None)):
            err, pid, epoch = await c.init_producer_id(txn, 60000, None)
            await c.add_partitions(txn, pid, epoch, TP)
            if commit is not None:
                await c.end_txn(txn, pid, epoch, commit)
        text = render(broker).decode()
        for line in ("kafkalite_transactions_open 1.0", "kafkalite_transactions_committed_total 1.0",
                     "kafkalite_transactions_aborted_total 1.0"):
            assert line in text
    finally:
        broker.close()


async def test_tick_completes_the_transaction_while_end_txn_waits_for_its_markers(h):
    pid, epoch = await begin(h)
    held, release = asyncio.Event(), asyncio.Event()
    recording = h.markers

    async def first_held(*args):
        if not held.is_set():
            held.set()
            await release.wait()
        return await recording(*args)
    h.coord.write_markers = first_held
    ending = asyncio.ensure_future(h.coord.end_txn("tx", pid, epoch, True))
    await h.settle()
    assert held.is_set()
    await h.tick(ABORT_CHECK)  # the retry writes the markers again and completes
    meta = h.coord.txns["tx"]
    assert meta.state == S.COMPLETE_COMMIT
    release.set()
    # before: IllegalState (CompleteCommit -> CompleteAbort) and the connection closed
    assert await ending == E.none
    assert meta.state == S.COMPLETE_COMMIT and h.coord.committed == 1
