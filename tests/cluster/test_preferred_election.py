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
from tests.cluster.test_membership import brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id as zk_controller
from tests.cluster.test_zk_admin_apis import create, settled_controller
from tests.cluster.test_zk_admin_apis import states as zk_states
from tests.helpers.real_kafka import anchor_dir
from tests.helpers.real_kafka import eventually as wait

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


# --- ElectLeaders, raw, against Kafka 3.8 in ZooKeeper mode ----------------------------------

VS_ASSIGNMENT = {0: [1, 2], 1: [2, 1]}
PREFERRED, UNCLEAN = 0, 1


def elect_raw(bootstrap: str, election_type: int, partitions: dict[str, list[int]] | None,
              version: int = 2) -> dict:
    """One ElectLeaders: {(topic, partition): (error code, message)} (top-level code as
    ("", -1) when not NONE)."""
    from kafka.protocol.admin import ElectLeadersRequest
    from tests.helpers.kbatch import call, connect as open_socket
    R = ElectLeadersRequest[version]
    tps = None if partitions is None else [R.TopicPartitions(topic=t, partitions=ps)
                                           for t, ps in partitions.items()]
    with open_socket(bootstrap) as s:
        resp = call(s, R(election_type=election_type, topic_partitions=tps, timeout_ms=10000))
    out = {(r.topic, p.partition_id): (p.error_code, p.error_message)
           for r in resp.replica_election_results for p in r.partition_result}
    if getattr(resp, "error_code", 0):
        out[("", -1)] = (resp.error_code, None)
    return out


async def vs_play(connect: str, bootstrap: str) -> list[dict]:
    """The scenario (broker 0 is the controller and hosts no replica; 1 and 2 simulated);
    the answers of each step."""
    from tests.cluster.test_controller import register

    admin = ZkClient(connect, SESSION_MS)
    await admin.start()
    sessions = [admin]
    answers = []

    async def ask(election_type, partitions, accept=lambda a: True) -> None:
        # NOT_CONTROLLER while the controller takes over: asked again
        got = await eventually(lambda: asyncio.to_thread(elect_raw, bootstrap, election_type,
                                                         partitions),
                               lambda a: 41 not in codes(a) and accept(a), timeout=30)
        answers.append(got)

    def codes(a) -> set:
        return {c for c, _ in a.values()}
    try:
        await admin.ensure_persistent_paths()
        one, two = await register(connect, 1), await register(connect, 2)
        sessions += [one, two]
        await admin_zk.create_topic(admin, "t", 2, 2, assignment=VS_ASSIGNMENT)
        await wait_states(admin, "t", lambda s: len(s) == 2)
        named = {"t": [0, 1, 7], "nope": [0]}
        await ask(PREFERRED, named, lambda a: a[("t", 0)][0] != 3)  # until the topic is known
        await ask(UNCLEAN, named)
        await ask(PREFERRED, None)
        await one.close()  # 2 leads both, 1 leaves the ISRs
        await wait_states(admin, "t", lambda s: all(st.isr == (2,) for st, _ in s.values()))
        sessions.append(await register(connect, 1))  # back, but out of sync
        await asyncio.sleep(1.5)  # the controller has taken it in
        await ask(PREFERRED, {"t": [0, 1]})
        await ask(PREFERRED, None)
        await rejoin_pair(admin)
        await ask(PREFERRED, {"t": [0, 1]}, lambda a: 80 not in codes(a))
        got = await wait_states(admin, "t", lambda s: s[0][0].leader == 1)
        answers.append({("state", p): (st.leader, st.leader_epoch, st.isr)
                        for p, (st, _) in got.items()})
        await two.close()
        await wait_states(admin, "t", lambda s: all(st.isr == (1,) for st, _ in s.values()))
        await sessions[-1].close()  # 1 was the last in sync: both offline
        await wait_states(admin, "t", lambda s: all(st.leader == -1 for st, _ in s.values()))
        sessions.append(await register(connect, 2))  # out of sync: only an unclean election
        await asyncio.sleep(1.5)
        await ask(PREFERRED, {"t": [0, 1]})
        await ask(UNCLEAN, {"t": [0, 1]}, lambda a: 83 not in codes(a))
        got = await wait_states(admin, "t", lambda s: all(st.leader == 2
                                                          for st, _ in s.values()))
        answers.append({("state", p): (st.leader, st.leader_epoch, st.isr,
                                       st.leader_recovery_state) for p, (st, _) in got.items()})
        return answers
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def rejoin_pair(admin: ZkClient) -> None:
    for p, (state, version) in (await states(admin, "t")).items():
        if 1 not in state.isr:
            new = zkdata.PartitionState(state.leader, state.leader_epoch, state.isr + (1,),
                                        state.controller_epoch, state.leader_recovery_state)
            await admin.multi([SetData(zkdata.partition_state_path("t", p), new.encode(),
                                       version)])


async def test_elect_leaders_answers_as_kafka_in_zookeeper_mode(zookeeper):
    from tests.cluster.test_controlled_shutdown import against_kafka
    ours, theirs = await against_kafka(zookeeper, vs_play)
    assert len(ours) == len(theirs) == 10
    # what the comparison rests on
    assert theirs[0][("t", 0)][0] == 84 and theirs[0][("nope", 0)][0] == 3  # not needed
    assert theirs[3][("t", 0)][0] == 80  # PREFERRED_LEADER_NOT_AVAILABLE
    assert theirs[5][("t", 0)] == (0, None)
    assert theirs[8] == {("t", 0): (0, None), ("t", 1): (0, None)}


# --- spawned kafkalite brokers ---------------------------------------------------------------

def _back_in_sync(z, topic: str, broker: int, partitions: int) -> None:
    """Wait until the leaders have taken `broker` back into every ISR (replication: it
    caught up, the leader's own conditional write). The test used to write that ISR itself
    before replication existed, which now races with the leaders' writes."""
    back = wait(lambda: zk_states(z, topic, range(partitions)),
                lambda s: all(broker in s[p].isr for p in range(partitions)), timeout=30)
    assert all(broker in back[p].isr for p in range(partitions)), back


def _led_away(brokers, zk, **settings):
    """3 brokers, an RF=3 topic; a broker leading some of it is restarted (its leadership
    moves off it) and taken back in sync. (procs, kazoo, topic, the broker, its partitions)."""
    import uuid

    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **settings)))
    z = zk()
    registered(z, {1, 2, 3})
    cid = settled_controller(z, procs)
    topic = f"pe-{uuid.uuid4().hex[:6]}"
    assert create(procs[cid].bootstrap, topic, partitions=3, rf=3).error_code == 0
    first = wait(lambda: zk_states(z, topic, range(3)), lambda s: len(s) == 3, timeout=20)
    b = next(i for i in (1, 2, 3) if i != cid)
    home = sorted(p for p, s in first.items() if s.leader == b)
    assert home
    procs[b].stop()
    procs[b].start()
    registered(z, {1, 2, 3})
    away = zk_states(z, topic, range(3))
    assert all(away[p].leader != b for p in home)
    _back_in_sync(z, topic, b, 3)
    return procs, z, topic, b, home


def test_kafka_leader_election_tool_moves_leaders_back_to_the_preferred_replica(brokers, zk):
    from tests.integration.test_admin_tools_kafka4 import run_tool
    if anchor_dir() is None:
        import pytest
        pytest.skip("no Kafka anchor (kafka-leader-election.sh)")
    procs, z, topic, b, home = _led_away(brokers, zk,
                                         **{"auto.leader.rebalance.enable": "false"})
    bootstrap = procs[b].bootstrap
    # the Admin client asks the controller, whichever broker it reaches first
    out = wait(lambda: run_tool(bootstrap, "kafka-leader-election.sh", "--election-type",
                                "PREFERRED", "--all-topic-partitions"),
               lambda o: "Successfully completed" in o, timeout=30)
    listed = ", ".join(f"{topic}-{p}" for p in home)
    assert out.strip() == f"Successfully completed leader election (PREFERRED) for " \
                          f"partitions {listed}", out
    now = zk_states(z, topic, range(3))
    assert all(now[p].leader == b for p in home)
    again = run_tool(bootstrap, "kafka-leader-election.sh", "--election-type", "PREFERRED",
                     "--all-topic-partitions")
    assert again.strip() == "", again  # partitions needing no election are left out
    # another broker than the controller: NOT_CONTROLLER for each partition named
    cid = zk_controller(z)
    other = procs[next(i for i in procs if i != cid)].bootstrap
    assert elect_raw(other, PREFERRED, {topic: [0, 1]}) == {(topic, 0): (41, None),
                                                           (topic, 1): (41, None)}
    assert elect_raw(other, PREFERRED, None) == {}


def test_auto_rebalance_moves_leaders_back_in_a_cluster(brokers, zk):
    procs, z, topic, b, home = _led_away(brokers, zk, **{
        "leader.imbalance.check.interval.seconds": "1"})
    back = wait(lambda: zk_states(z, topic, range(3)),
                lambda s: all(s[p].leader == b for p in home), timeout=20)
    assert all(back[p].leader == b for p in home), back
