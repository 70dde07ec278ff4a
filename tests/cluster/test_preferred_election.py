# Preferred-leader election in a ZooKeeper cluster (issue 17, design step 9), as Kafka 3.8's
# ZooKeeper-mode controller runs it:
#   - the automatic rebalance (auto.leader.rebalance.enable, leader.imbalance.*) on the
#     injected clock: an in-process Controller on a FakeClock and a real ZooKeeper, brokers
#     simulated by registrations (test_controller.py's `cluster`);
#   - /admin/preferred_replica_election;
#   - ElectLeaders, raw, against kafkalite brokers and Kafka 3.8 in ZooKeeper mode playing
#     the same scenario on its own chroot;
#   - kafka-leader-election.sh --election-type PREFERRED --all-topic-partitions against a
#     spawned kafkalite cluster.
# Leaders change ISRs themselves (design §4); without replication here, a test writes the
# ISR expansion a leader would write (`rejoin`), conditionally, as the leader does.
from __future__ import annotations

import asyncio

from kafkalite.clock import FakeClock
from kafkalite.cluster import admin_zk, zkdata
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.zk import SetData, ZkClient
from tests.cluster.test_controller import (SESSION_MS, active, cluster, eventually,  # noqa: F401
                                           states, wait_states)

ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


async def rejoin(admin: ZkClient, topic: str, broker: int) -> None:
    """The leaders take `broker` back into their ISRs (a conditional write each)."""
    for p, (state, version) in (await states(admin, topic)).items():
        if broker not in state.isr and broker in ASSIGNMENT[p]:
            new = zkdata.PartitionState(state.leader, state.leader_epoch,
                                        state.isr + (broker,), state.controller_epoch,
                                        state.leader_recovery_state)
            await admin.multi([SetData(zkdata.partition_state_path(topic, p), new.encode(),
                                       version)])


async def controller(cluster, clock: FakeClock | None = None, **options) -> Controller:
    zk = ZkClient(cluster.connect, SESSION_MS)
    await zk.start()
    cluster.sessions.append(zk)
    ctl = Controller(zk, 9, clock=clock, **options)
    await ctl.start()
    cluster.controllers.append(ctl)
    assert await eventually(lambda: active(ctl), bool)
    return ctl


async def led_elsewhere(cluster, ctl: Controller, one: ZkClient | None = None) -> dict:
    """Broker 1 goes and comes back (the topic made first when `one`, its session, is not
    given): partition 0 (preferred 1) is led by 2, every ISR full again."""
    if one is None:
        one = {b: await cluster.broker(b) for b in (1, 2, 3)}[1]
        await admin_zk.create_topic(cluster.admin, "t", 3, 3, assignment=ASSIGNMENT)
        await wait_states(cluster.admin, "t", lambda s: len(s) == 3)
    await one.close()
    await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 2)
    cluster.one = await cluster.broker(1)
    assert 1 in await eventually(lambda: ctl.submit(lambda: asyncio.sleep(0, ctl.live)),
                                 lambda live: 1 in live)
    await rejoin(cluster.admin, "t", 1)
    return await wait_states(cluster.admin, "t", lambda s: all(
        len(st.isr) == 3 for st, _ in s.values()))


async def settled(ctl: Controller) -> None:
    """Every queued controller item has run (the queue is FIFO)."""
    await ctl.submit(lambda: asyncio.sleep(0))


async def test_auto_rebalance_runs_on_the_clock_and_moves_leaders_home(cluster):
    clock = FakeClock()
    ctl = await controller(cluster, clock, auto_rebalance=True,
                           imbalance_interval_ms=300_000, imbalance_percentage=10)
    before = await led_elsewhere(cluster, ctl)
    assert before[0][0].leader == 2
    clock.advance(4_999)  # the first check comes 5 s after the controller took over
    await settled(ctl)
    assert (await states(cluster.admin, "t")) == before
    clock.advance(1)
    got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 1)
    # the preferred replica leads again: same ISR, leader epoch + 1
    assert got[0][0] == zkdata.PartitionState(1, before[0][0].leader_epoch + 1,
                                              before[0][0].isr, ctl.epoch)
    assert {p: got[p] for p in (1, 2)} == {p: before[p] for p in (1, 2)}

    # then every leader.imbalance.check.interval.seconds
    away = await led_elsewhere(cluster, ctl, cluster.one)
    clock.advance(299_999)
    await settled(ctl)
    assert (await states(cluster.admin, "t")) == away
    clock.advance(1)
    await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 1)


async def test_no_rebalance_below_the_imbalance_percentage_or_when_disabled(cluster):
    clock = FakeClock()
    ctl = await controller(cluster, clock, auto_rebalance=True,
                           imbalance_interval_ms=300_000, imbalance_percentage=100)
    before = await led_elsewhere(cluster, ctl)
    clock.advance(5_000)  # broker 1: 1 of its 1 partition led elsewhere is 100%, not more
    await settled(ctl)
    assert (await states(cluster.admin, "t")) == before
    ctl.imbalance_percentage = 99
    clock.advance(300_000)
    await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 1)


async def test_preferred_replica_election_znode_is_carried_out_and_deleted(cluster):
    ctl = await controller(cluster)  # no automatic rebalance
    before = await led_elsewhere(cluster, ctl)
    await cluster.admin.create(zkdata.PREFERRED_REPLICA_ELECTION,
                               zkdata.encode_preferred_replica_election([("t", 0), ("t", 9)]))
    got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 1)
    assert got[0][0].leader_epoch == before[0][0].leader_epoch + 1
    assert await eventually(lambda: cluster.admin.exists(zkdata.PREFERRED_REPLICA_ELECTION),
                            lambda st: st is None) is None
