# The controller (kafkalite.cluster.controller) against a real ZooKeeper, each test on a chroot
# of its own. Controllers run in-process, each on its own ZooKeeper session; brokers are
# simulated by registering /brokers/ids/<id> (zkdata's encoding) from sessions of their own,
# so a broker's death is the end of its session. What is checked is what lands in the state
# znodes, decoded with zkdata: what Kafka 3.8's ZooKeeper-mode controller writes.
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Awaitable, Callable

import pytest

from kafkalite.cluster import admin_zk, zkdata
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.zk import ControllerMoved, ZkClient
from kafkalite.wire.errors import ErrorCode, KafkaError
from tests.helpers.zookeeper import chroot_connect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SESSION_MS = 4000
STATE_KEYS = {"version", "leader", "leader_epoch", "controller_epoch", "isr"}


async def eventually(probe: Callable[[], Awaitable[Any]], accept: Callable[[Any], bool],
                     timeout: float = 15.0) -> Any:
    """probe() until accept(result), bounded; the last result either way."""
    deadline = time.monotonic() + timeout
    result = await probe()
    while not accept(result) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        result = await probe()
    return result


async def register(connect: str, broker_id: int, rack: str | None = None) -> ZkClient:
    """A simulated broker: a session holding /brokers/ids/<broker_id>."""
    zk = ZkClient(connect, SESSION_MS)
    await zk.start()
    await zk.ensure_path(zkdata.BROKER_IDS)
    await zk.checked_ephemeral_create(zkdata.broker_path(broker_id), zkdata.BrokerRegistration(
        broker_id, (zkdata.Endpoint("PLAINTEXT", "127.0.0.1", 19000 + broker_id),),
        {"PLAINTEXT": "PLAINTEXT"}, int(time.time() * 1000), rack).encode())
    return zk


async def states(zk: ZkClient, topic: str) -> dict[int, tuple[zkdata.PartitionState, int]]:
    """{partition: (state, znode version)} of the topic's state znodes present now."""
    assignment = zkdata.TopicAssignment.decode((await zk.get(zkdata.topic_path(topic)))[0])
    out = {}
    for p in assignment.partitions:
        if await zk.exists(zkdata.partition_state_path(topic, p)) is not None:
            data, st = await zk.get(zkdata.partition_state_path(topic, p))
            assert set(json.loads(data)) == STATE_KEYS | (
                {"leader_recovery_state"} if b"leader_recovery_state" in data else set())
            assert zkdata.PartitionState.decode(data).encode() == data  # Kafka's exact bytes
            out[p] = (zkdata.PartitionState.decode(data), st.version)
    return out


async def wait_states(zk: ZkClient, topic: str, accept: Callable[[dict], bool]) -> dict:
    return await eventually(lambda: states(zk, topic), accept)


@pytest.fixture
async def cluster(zookeeper):
    """A chroot with an admin session; `.broker(id)` and `.controller(id)` add members, all
    closed at the end."""
    class Cluster:
        connect = chroot_connect(zookeeper)
        sessions: list[ZkClient] = []
        controllers: list[Controller] = []
        admin: ZkClient

        async def broker(self, broker_id: int, rack: str | None = None) -> ZkClient:
            zk = await register(self.connect, broker_id, rack)
            self.sessions.append(zk)
            return zk

        async def controller(self, broker_id: int) -> Controller:
            zk = ZkClient(self.connect, SESSION_MS)
            await zk.start()
            self.sessions.append(zk)
            c = Controller(zk, broker_id)
            await c.start()
            self.controllers.append(c)
            return c

    c = Cluster()
    c.sessions, c.controllers = [], []
    c.admin = ZkClient(c.connect, SESSION_MS)
    await c.admin.start()
    await c.admin.ensure_persistent_paths()
    yield c
    for ctl in c.controllers:
        await ctl.stop()
    await asyncio.gather(*(s.close() for s in [*c.sessions, c.admin]))


async def active(c: Controller) -> bool:
    return c.active


async def test_rf3_topic_states_follow_the_assignment(cluster):
    for b in (1, 2, 3):
        await cluster.broker(b)
    ctl = await cluster.controller(1)
    assert await eventually(lambda: active(ctl), bool)
    topic = await admin_zk.create_topic(cluster.admin, "t", 6, 3)
    got = await wait_states(cluster.admin, "t", lambda s: len(s) == 6)
    assert len(got) == 6
    for p, replicas in topic.partitions.items():
        # leader = first replica, ISR = all of them in assignment order, first epochs
        assert got[p] == (zkdata.PartitionState(replicas[0], 0, replicas, ctl.epoch), 0)
    leaders = [s.leader for s, _ in got.values()]
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]  # round-robin spread
    assert ctl.epoch == zkdata.decode_controller_epoch(
        (await cluster.admin.get(zkdata.CONTROLLER_EPOCH))[0])


async def test_a_dead_leader_is_replaced_by_the_next_isr_member_and_leaves_every_isr(cluster):
    brokers = {b: await cluster.broker(b) for b in (1, 2, 3)}
    ctl = await cluster.controller(9)
    assert await eventually(lambda: active(ctl), bool)
    await admin_zk.create_topic(cluster.admin, "t", 3, 3,
                                assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    await wait_states(cluster.admin, "t", lambda s: len(s) == 3)
    await brokers[1].close()
    got = await wait_states(cluster.admin, "t",
                            lambda s: all(1 not in st.isr for st, _ in s.values()))
    # partition 0 (led by 1): the next replica in assignment order that is in sync
    assert got[0] == (zkdata.PartitionState(2, 1, (2, 3), ctl.epoch), 1)
    # partitions 1 and 2 keep their leader; 1 leaves the ISR (OfflineReplica), epoch + 1
    assert got[1] == (zkdata.PartitionState(2, 1, (2, 3), ctl.epoch), 1)
    assert got[2] == (zkdata.PartitionState(3, 1, (3, 2), ctl.epoch), 1)


async def test_offline_without_isr_then_the_returning_isr_member_leads(cluster):
    brokers = {b: await cluster.broker(b) for b in (1, 2)}
    ctl = await cluster.controller(9)
    assert await eventually(lambda: active(ctl), bool)
    await admin_zk.create_topic(cluster.admin, "t", 1, 2, assignment={0: [1, 2]})
    await wait_states(cluster.admin, "t", lambda s: len(s) == 1)
    await brokers[1].close()
    got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 2)
    assert got[0] == (zkdata.PartitionState(2, 1, (2,), ctl.epoch), 1)
    await brokers[2].close()
    got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == -1)
    # unclean.leader.election.enable=false: offline, and the last ISR member stays in it
    assert got[0] == (zkdata.PartitionState(-1, 2, (2,), ctl.epoch), 2)
    await cluster.broker(1)  # not in the ISR: may not lead
    assert await eventually(lambda: ctl.submit(lambda: asyncio.sleep(0, ctl.live)),
                            lambda live: 1 in live) == {1}
    assert (await states(cluster.admin, "t"))[0][0].leader == -1
    await cluster.broker(2)
    got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 2)
    assert got[0] == (zkdata.PartitionState(2, 3, (2,), ctl.epoch), 3)


async def test_unclean_topic_elects_an_out_of_sync_replica_as_recovering(cluster):
    brokers = {b: await cluster.broker(b) for b in (1, 2)}
    ctl = await cluster.controller(9)
    assert await eventually(lambda: active(ctl), bool)
    await admin_zk.create_topic(cluster.admin, "u", 1, 2, {"unclean.leader.election.enable":
                                                           "true"}, assignment={0: [1, 2]})
    await wait_states(cluster.admin, "u", lambda s: len(s) == 1)
    await brokers[2].close()
    await wait_states(cluster.admin, "u", lambda s: s[0][0].isr == (1,))
    await brokers[1].close()
    await wait_states(cluster.admin, "u", lambda s: s[0][0].leader == -1)
    await cluster.broker(2)
    got = await wait_states(cluster.admin, "u", lambda s: s[0][0].leader == 2)
    assert got[0][0] == zkdata.PartitionState(2, 3, (2,), ctl.epoch, zkdata.RECOVERING)


async def test_new_partitions_get_states_and_a_topic_with_no_live_replica_waits(cluster):
    await cluster.broker(1)
    ctl = await cluster.controller(9)
    assert await eventually(lambda: active(ctl), bool)
    await admin_zk.create_topic(cluster.admin, "t", 2, 1, assignment={0: [1], 1: [1]})
    await wait_states(cluster.admin, "t", lambda s: len(s) == 2)
    await cluster.broker(2)
    # broker 5 is a placement candidate the caller names, not registered yet
    grown = await admin_zk.create_partitions(cluster.admin, "t", 4, assignment={2: [2], 3: [5]},
                                             racks={1: None, 2: None, 5: None})
    got = await wait_states(cluster.admin, "t", lambda s: len(s) == 3)
    assert got[2] == (zkdata.PartitionState(2, 0, (2,), ctl.epoch), 0) and 3 not in got
    assert grown.partitions[3] == (5,)
    await cluster.broker(5)  # partition 3's only replica registers: it becomes online
    got = await wait_states(cluster.admin, "t", lambda s: len(s) == 4)
    assert got[3] == (zkdata.PartitionState(5, 0, (5,), ctl.epoch), 0)



async def test_a_leaders_isr_change_is_read_again_not_overwritten(cluster):
    """The controller's cached state is stale (the leader shrank the ISR meanwhile): its
    conditional write fails on the version, it reads the state again and decides on it."""
    brokers = {b: await cluster.broker(b) for b in (1, 2, 3)}
    ctl = await cluster.controller(9)
    assert await eventually(lambda: active(ctl), bool)
    await admin_zk.create_topic(cluster.admin, "t", 1, 3, assignment={0: [1, 2, 3]})
    got = await wait_states(cluster.admin, "t", lambda s: len(s) == 1)
    state, version = got[0]
    # broker 1, the leader, drops 3 from the ISR (a leader's own ISR write: same leader epoch)
    await cluster.admin.set(zkdata.partition_state_path("t", 0), zkdata.PartitionState(
        1, 0, (1, 2), state.controller_epoch).encode(), version)
    await brokers[2].close()
    got = await wait_states(cluster.admin, "t", lambda s: 2 not in s[0][0].isr)
    assert got[0] == (zkdata.PartitionState(1, 1, (1,), ctl.epoch), 2)


async def test_a_sigstopped_brokers_session_expires_and_its_leadership_moves(cluster):
    """A broker that stops heartbeating (SIGSTOP of the process holding its registration)
    is dead once ZooKeeper expires its session, as Kafka's failover time follows
    zookeeper.session.timeout.ms."""
    await cluster.broker(2)
    holder = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests", "cluster", "zk_holder.py"),
         cluster.connect, "1500", zkdata.broker_path(7)], stdout=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        line = await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 30)
        assert line.startswith("ready"), line
        ctl = await cluster.controller(9)
        assert await eventually(lambda: active(ctl), bool)
        await admin_zk.create_topic(cluster.admin, "t", 1, 2, assignment={0: [7, 2]})
        got = await wait_states(cluster.admin, "t", lambda s: len(s) == 1)
        assert got[0] == (zkdata.PartitionState(7, 0, (7, 2), ctl.epoch), 0)
        os.kill(holder.pid, signal.SIGSTOP)
        got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 2)
        assert got[0] == (zkdata.PartitionState(2, 1, (2,), ctl.epoch), 1)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait(10)

def expire(zk: ZkClient) -> None:
    """End zk's session on the server as an expiry does (ZooKeeper's own test trick: a second
    client on the same session id and password closes it); zk's kazoo then finds its session
    expired and starts a new one."""
    from kazoo.client import KazooClient
    twin = KazooClient(hosts=zk.hosts + zk.chroot, client_id=zk._kazoo.client_id)
    twin.start(timeout=10)
    twin.stop()
    twin.close()


async def test_two_controllers_one_acts_and_the_deposed_ones_write_fails(cluster):
    for b in (1, 2):
        await cluster.broker(b)
    one, two = await cluster.controller(1), await cluster.controller(2)
    both = await eventually(lambda: asyncio.sleep(0, (one.active, two.active)), any)
    assert both.count(True) == 1
    first, other = (one, two) if one.active else (two, one)
    await admin_zk.create_topic(cluster.admin, "t", 1, 2, assignment={0: [1, 2]})
    got = await wait_states(cluster.admin, "t", lambda s: len(s) == 1)
    assert got[0][0].controller_epoch == first.epoch and not other.active
    owner = zkdata.ControllerRegistration.decode((await cluster.admin.get(
        zkdata.CONTROLLER))[0])
    assert owner.broker_id == first.broker_id
    with pytest.raises(KafkaError) as refused:  # admin actions go to the controller only
        await other.submit(lambda: asyncio.sleep(0))
    assert refused.value.code == ErrorCode.not_controller

    # The first controller is about to write when its session ends
    gate = asyncio.Event()

    async def pending_write() -> None:
        await gate.wait()
        await first.update_state(("t", 0), lambda s: zkdata.PartitionState(
            s.leader, s.leader_epoch + 1, s.isr, first.epoch))
    write = asyncio.ensure_future(first.submit(pending_write))
    await asyncio.sleep(0.1)
    old_session = first.zk.session_id
    await asyncio.get_running_loop().run_in_executor(None, expire, first.zk)
    assert await eventually(lambda: active(other), bool)
    assert other.epoch == first.epoch + 1
    # kazoo opens a new session: the write goes out on it, with the old epoch's fence
    assert await eventually(lambda: asyncio.sleep(0, first.zk.session_id),
                            lambda s: s not in (0, old_session)) not in (0, old_session)
    gate.set()
    with pytest.raises(ControllerMoved):
        await asyncio.wait_for(write, 15)
    assert not first.active
    assert (await states(cluster.admin, "t"))[0][0].leader_epoch == 0  # nothing written
    # the new controller acts: a broker death moves leadership
    await cluster.sessions[0].close()  # broker 1
    got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 2)
    assert got[0] == (zkdata.PartitionState(2, 1, (2,), other.epoch), 1)
    assert not first.active


async def test_a_sigkilled_controller_process_is_replaced_with_the_next_epoch(cluster):
    """The controller in a process of its own, SIGKILLed: its session expires (no close),
    /controller goes, and the in-process one takes over with epoch + 1 and acts."""
    for b in (1, 2):
        await cluster.broker(b)
    await cluster.admin.ensure_path(zkdata.BROKER_IDS)
    proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.test_controller",
                             cluster.connect, "7"], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        line = await asyncio.get_running_loop().run_in_executor(None, proc.stdout.readline)
        assert line.split()[0] == b"controller", line
        killed_epoch = int(line.split()[1])
        standby = await cluster.controller(8)
        await asyncio.sleep(0.5)
        assert not standby.active
        await admin_zk.create_topic(cluster.admin, "t", 1, 2, assignment={0: [1, 2]})
        got = await wait_states(cluster.admin, "t", lambda s: len(s) == 1)
        assert got[0] == (zkdata.PartitionState(1, 0, (1, 2), killed_epoch), 0)
        proc.kill()
        assert await eventually(lambda: active(standby), bool, timeout=SESSION_MS / 1000 + 15)
        assert standby.epoch == killed_epoch + 1
        await cluster.sessions[0].close()  # broker 1
        got = await wait_states(cluster.admin, "t", lambda s: s[0][0].leader == 2)
        assert got[0] == (zkdata.PartitionState(2, 1, (2,), standby.epoch), 1)
    finally:
        proc.kill()
        proc.wait(10)


async def _controller_process(connect: str, broker_id: int) -> None:
    """Run a controller until killed (bounded): prints "controller <epoch>" once active."""
    zk = ZkClient(connect, SESSION_MS)
    await zk.start()
    controller = Controller(zk, broker_id)
    await controller.start()
    await eventually(lambda: active(controller), bool)
    print("controller", controller.epoch, flush=True)
    await asyncio.sleep(120)


if __name__ == "__main__":
    asyncio.run(_controller_process(sys.argv[1], int(sys.argv[2])))


async def test_a_new_controller_takes_replicas_of_dead_brokers_offline(cluster):
    """Brokers that died while no controller ran: the next controller takes their replicas
    offline first (Kafka's replicaStateMachine.startup: out of the ISR, a dead leader
    replaced by -1, the last ISR member kept), then elects (partitionStateMachine.startup)."""
    brokers = {b: await cluster.broker(b) for b in (1, 2, 3)}
    first = await cluster.controller(9)
    assert await eventually(lambda: active(first), bool)
    await admin_zk.create_topic(cluster.admin, "t", 2, 2, assignment={0: [1, 2], 1: [2, 3]})
    await admin_zk.create_topic(cluster.admin, "s", 1, 1, assignment={0: [3]})
    await wait_states(cluster.admin, "t", lambda s: len(s) == 2)
    await wait_states(cluster.admin, "s", lambda s: len(s) == 1)
    await first.stop()
    await first.zk.close()  # its session, and with it /controller: no controller now
    await brokers[3].close()
    assert await eventually(lambda: live_ids(cluster.admin), lambda ids: ids == {1, 2}) == {1, 2}
    second = await cluster.controller(8)
    assert await eventually(lambda: active(second), bool)
    got = await wait_states(cluster.admin, "t", lambda s: s[1][0].isr == (2,))
    assert got[0][0].isr == (1, 2) and got[0][1] == 0  # untouched
    # 3 left the ISR of partition 1 (led by 2): one write, leader epoch + 1
    assert got[1] == (zkdata.PartitionState(2, 1, (2,), second.epoch), 1)
    # the only replica of s-0 died: no leader, its ISR kept so it can lead again cleanly
    solo = await wait_states(cluster.admin, "s", lambda s: s[0][0].leader == -1)
    assert solo[0] == (zkdata.PartitionState(-1, 1, (3,), second.epoch), 1)


async def live_ids(zk: ZkClient) -> set[int]:
    return {int(c) for c in await zk.children(zkdata.BROKER_IDS)}


async def test_isr_change_notifications_are_read_and_deleted(cluster):
    """A leader's ISR change announced under /isr_change_notification (what replication.py
    writes after its conditional state write): the controller re-reads those partitions'
    states and deletes the notifications, as Kafka's IsrChangeNotification handler, also
    ones left while no controller ran; an unreadable one is deleted too."""
    for b in (1, 2, 3):
        await cluster.broker(b)
    admin = cluster.admin
    await admin_zk.create_topic(admin, "t", 1, 3, assignment={0: [1, 2, 3]})
    left = await admin.create(f"{zkdata.ISR_CHANGE_NOTIFICATION}/{zkdata.ISR_CHANGE_PREFIX}",
                              b"not json", sequence=True)  # before any controller
    ctl = await cluster.controller(9)
    assert await eventually(lambda: active(ctl), bool)
    (state, version), = (await wait_states(admin, "t", lambda s: len(s) == 1)).values()
    assert await eventually(lambda: admin.children(zkdata.ISR_CHANGE_NOTIFICATION),
                            lambda c: not c) == []
    assert await admin.exists(left) is None
    # leader 1 shrinks the ISR itself (same leader epoch), then announces it
    shrunk = zkdata.PartitionState(1, state.leader_epoch, (1, 2), state.controller_epoch)
    await admin.set(zkdata.partition_state_path("t", 0), shrunk.encode(), version)
    await admin.create(f"{zkdata.ISR_CHANGE_NOTIFICATION}/{zkdata.ISR_CHANGE_PREFIX}",
                       zkdata.encode_isr_change([("t", 0)]), sequence=True)
    assert await eventually(lambda: admin.children(zkdata.ISR_CHANGE_NOTIFICATION),
                            lambda c: not c) == []
    assert ctl.states[("t", 0)] == (shrunk, version + 1)  # the controller's view follows
