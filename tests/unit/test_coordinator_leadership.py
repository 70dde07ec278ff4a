# The coordinators' load/unload state machine of a cluster broker (issue 17, design step 8),
# driven directly on a fake clock with real logs in a temporary directory: with
# zookeeper.connect nothing is loaded at start and every group (transactional id) answers
# NOT_COORDINATOR until its partition is elected here; an elected partition answers
# COORDINATOR_LOAD_IN_PROGRESS until its log is replayed; a resigned one drops its groups
# (their waiting joins answered NOT_COORDINATOR, their timers stopped) and answers
# NOT_COORDINATOR again; the partition's leader epoch is the coordinator epoch. Without
# zookeeper.connect every partition is loaded at start, as before.
from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator.groups import CommittedOffset
from kafkalite.coordinator.offsets_log import partition_for
from kafkalite.coordinator.transactions_coordinator import TransactionCoordinator
from kafkalite.log.manager import LogManager
from tests.unit.test_groups_timers import Harness

CLUSTER = {"zookeeper.connect": "127.0.0.1:1/unused"}  # never connected: only read
PARTS = 4


def config(tmp_path: Path, **settings: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path / "data"),
                         "offsets.topic.num.partitions": str(PARTS),
                         "transaction.state.log.num.partitions": str(PARTS),
                         "group.initial.rebalance.delay.ms": "0", **settings})


class Groups(Harness):
    """test_groups_timers' harness (a real offsets log, the fake clock) on PARTS partitions."""

    def __init__(self, tmp_path: Path, **settings: str):
        super().__init__(tmp_path, **{"offsets.topic.num.partitions": str(PARTS), **settings})

    def commit(self, group: str, offset: int) -> dict:
        o = CommittedOffset(offset, -1, "", self.clock.wall_ms(), -1)
        return self.coord.commit_offsets(group, "", None, -1, {("t", 0): o})

    def fetched(self, group: str) -> tuple:
        err, rows = self.coord.fetch_offsets(group, [("t", 0)])
        return err, [o.offset if o else -1 for _, o in rows]


async def loaded(coord, partition: int) -> None:
    for _ in range(100):  # bounded: a load is a few turns of the loop
        if partition not in coord.loading_partitions:
            return
        await asyncio.sleep(0)
    raise AssertionError("the load never finished")


@pytest.fixture
def groups(tmp_path):
    made = []

    def make(**settings: str) -> Groups:
        made.append(Groups(tmp_path, **settings))
        return made[-1]
    yield make
    for g in made:
        g.close()


async def test_a_cluster_broker_coordinates_only_the_partitions_elected_here(groups):
    g = groups(**CLUSTER)
    g.logs.create_topic("__consumer_offsets", PARTS, internal=True)  # the view adopts it
    group = "g1"
    p = partition_for(group, PARTS)
    assert g.coord.check_status(group, False) == E.not_coordinator
    assert g.commit(group, 5) == {("t", 0): E.not_coordinator}
    g.coord.leadership.elect(p, 3)
    assert g.coord.check_status(group, False) == E.coordinator_load_in_progress
    await loaded(g.coord, p)
    assert g.coord.check_status(group, False) is None
    assert g.coord.coordinator_epoch(group) == 3
    other = next(f"x{i}" for i in range(100) if partition_for(f"x{i}", PARTS) != p)
    assert g.coord.check_status(other, False) == E.not_coordinator
    assert g.commit(group, 42) == {("t", 0): E.none}
    g.coord.leadership.resign(p)
    assert g.coord.check_status(group, False) == E.not_coordinator
    assert group not in g.coord.groups
    g.coord.leadership.elect(p, 4)  # back here: the offsets come from the log
    await loaded(g.coord, p)
    assert g.fetched(group) == (E.none, [42])
    assert g.coord.coordinator_epoch(group) == 4


async def test_resigning_answers_waiting_joins_and_stops_the_groups_timers(groups):
    g = groups(**CLUSTER)
    g.logs.create_topic("__consumer_offsets", PARTS, internal=True)
    group = "g2"
    p = partition_for(group, PARTS)
    g.coord.leadership.elect(p, 0)
    await loaded(g.coord, p)
    fut = g.coord.join_group(group, "", None, False, False, "c", "/127.0.0.1", 20000, 6000,
                             "consumer", [("range", b"")], None)
    g.clock.advance(0)  # the join phase ends (no initial delay): the member is in
    joined = fut.result()
    assert joined.error == E.none
    pending = g.coord.join_group(group, "", None, False, False, "c2", "/127.0.0.1", 20000,
                                 6000, "consumer", [("range", b"")], None)  # a rebalance
    assert not pending.done()
    end = g.logs.get("__consumer_offsets").partitions[p].log_end_offset
    g.coord.leadership.resign(p)
    assert pending.done() and pending.result().error == E.not_coordinator
    g.clock.advance(60_000)  # sessions and rebalance timeouts: nobody left to expire
    assert g.logs.get("__consumer_offsets").partitions[p].log_end_offset == end
    assert g.coord.heartbeat(group, joined.member_id, None, joined.generation) == \
        E.not_coordinator


async def test_a_resignation_during_the_load_cancels_it(groups):
    g = groups(**CLUSTER)
    g.logs.create_topic("__consumer_offsets", PARTS, internal=True)
    p = partition_for("g3", PARTS)
    g.coord.leadership.elect(p, 0)
    g.coord.leadership.resign(p)
    for _ in range(10):
        await asyncio.sleep(0)
    assert g.coord.check_status("g3", False) == E.not_coordinator
    assert p not in g.coord.leadership.owned and not g.coord.loading_partitions
    g.coord.leadership.elect(p, 5)
    g.coord.leadership.elect(p, 6)  # a newer epoch while loading: the load ends with it
    await loaded(g.coord, p)
    assert g.coord.coordinator_epoch("g3") == 6


async def test_one_node_serves_every_group_without_elections(groups):
    g = groups()
    g.logs.create_topic("__consumer_offsets", PARTS, internal=True)
    assert g.coord.leadership is None and g.coord.coordinator_epoch("g4") == 0
    assert g.commit("g4", 7) == {("t", 0): E.none}
    assert g.fetched("g4") == (E.none, [7])


@pytest.fixture
def txns(tmp_path):
    """txns(write_markers) -> a cluster broker's TransactionCoordinator on a real
    __transaction_state of PARTS partitions (the view adopts it), producer ids from 1000."""
    cfg = config(tmp_path, **CLUSTER)
    logs = LogManager(cfg)
    logs.open()
    logs.create_topic("__transaction_state", PARTS, internal=True)
    pids = itertools.count(1000)
    made = []

    async def allocate() -> int:
        return next(pids)

    def make(write_markers) -> TransactionCoordinator:
        made.append(TransactionCoordinator(cfg, logs, logs.create_topic, clock=FakeClock(),
                                           allocate_pid=allocate, write_markers=write_markers))
        made[-1].open()
        return made[-1]
    yield make
    for coord in made:
        coord.close()
    logs.close()


async def test_transactional_ids_load_on_election_and_go_on_resignation(txns):
    markers: list = []

    async def write_markers(pid, epoch, coordinator_epoch, commit, partitions):
        markers.append(coordinator_epoch)
        return {tp: E.none for tp in partitions}
    coord = txns(write_markers)
    txn = "tx"
    p = partition_for(txn, PARTS)
    assert (await coord.init_producer_id(txn, 60000, None))[0] == E.not_coordinator
    coord.leadership.elect(p, 7)
    assert (await coord.init_producer_id(txn, 60000, None))[0] == \
        E.coordinator_load_in_progress
    await loaded(coord, p)
    err, pid, epoch = await coord.init_producer_id(txn, 60000, None)
    assert err == E.none
    assert await coord.add_partitions(txn, pid, epoch, [("t", 0)]) == E.none
    assert await coord.end_txn(txn, pid, epoch, True) == E.none
    assert markers == [7]  # the partition's leader epoch is the coordinator epoch
    coord.leadership.resign(p)
    assert coord.describe(txn)[0] == E.not_coordinator and txn not in coord.txns
    coord.leadership.elect(p, 8)
    await loaded(coord, p)
    err, meta = coord.describe(txn)
    assert (err, meta.producer_id, meta.producer_epoch) == (E.none, pid, epoch)
    assert coord.coordinator_epoch(txn) == 8


async def test_a_completion_resumed_after_the_resignation_writes_nothing(txns):
    release = asyncio.Event()

    async def slow_markers(pid, epoch, coordinator_epoch, commit, partitions):
        await release.wait()  # the markers take their time: the partition moves meanwhile
        return {tp: E.none for tp in partitions}
    coord = txns(slow_markers)
    log_of = coord.log.topic().partitions
    txn = "tx2"
    p = partition_for(txn, PARTS)
    coord.leadership.elect(p, 0)
    await loaded(coord, p)
    _, pid, epoch = await coord.init_producer_id(txn, 60000, None)
    assert await coord.add_partitions(txn, pid, epoch, [("t", 0)]) == E.none
    ending = asyncio.ensure_future(coord.end_txn(txn, pid, epoch, True))
    for _ in range(10):
        await asyncio.sleep(0)
    end = log_of[p].log_end_offset  # PrepareCommit written
    coord.leadership.resign(p)
    release.set()
    await ending
    assert log_of[p].log_end_offset == end  # no CompleteCommit from here
