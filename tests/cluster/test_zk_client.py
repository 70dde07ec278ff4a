# kafkalite.cluster.zk against a real ZooKeeper (the session `zookeeper` fixture; each test in
# a chroot of its own): conditional writes, the controller-epoch fence, controller election,
# ephemeral registrations and session expiry, and the event loop kept free of ZooKeeper I/O.
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

import pytest

from kafkalite.cluster import zkdata
from kafkalite.cluster.zk import (BadVersion, Check, ControllerMoved, Create, NodeExists,
                                  NoNode, SessionEvent,
                                  SetData, WatchEvent, ZkClient, split_connect)
from tests.helpers.zookeeper import chroot_connect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SESSION_MS = 1500


async def next_watch(client: ZkClient) -> WatchEvent:
    """The next watch notification (session state changes pass by)."""
    while not isinstance(event := await client.events.get(), WatchEvent):
        pass
    return event


@pytest.fixture
async def connect(zookeeper):
    return chroot_connect(zookeeper)


@pytest.fixture
async def clients(connect):
    """clients(n): n sessions on the test's chroot, closed at the end."""
    made: list[ZkClient] = []

    async def make(n: int) -> list[ZkClient]:
        new = [ZkClient(connect, SESSION_MS) for _ in range(n)]
        await asyncio.gather(*(c.start() for c in new))
        made.extend(new)
        return new
    yield make
    await asyncio.gather(*(c.close() for c in made))


async def test_chroot_is_created_and_paths_live_under_it(zookeeper, connect, clients):
    (a,) = await clients(1)
    await a.ensure_persistent_paths()
    root = ZkClient(zookeeper, SESSION_MS)
    await root.start()
    try:
        chroot = connect[connect.index("/"):]
        assert set(await root.children(chroot)) >= {"brokers", "config", "admin"}
        assert await root.exists(chroot + "/brokers/topics") is not None
    finally:
        await root.close()


async def test_a_stale_conditional_write_loses(clients):
    a, b = await clients(2)
    path = zkdata.partition_state_path("t", 0)
    await a.ensure_path(path.rsplit("/", 1)[0])
    await a.create(path, zkdata.PartitionState(1, 0, (1, 2, 3), 1).encode())
    _, seen_by_a = await a.get(path)
    _, seen_by_b = await b.get(path)
    # b shrinks the ISR first, conditionally on the version it read: the partition epoch moves
    shrunk = await b.set(path, zkdata.PartitionState(1, 0, (1, 2), 1).encode(),
                         seen_by_b.version)
    assert shrunk.version == seen_by_b.version + 1
    with pytest.raises(BadVersion):
        await a.set(path, zkdata.PartitionState(2, 1, (2, 3), 1).encode(), seen_by_a.version)
    data, st = await a.get(path)
    assert zkdata.PartitionState.decode(data).isr == (1, 2) and st.version == shrunk.version


async def test_a_multi_is_all_or_nothing(clients):
    (a,) = await clients(1)
    created = await a.multi([Create("/n", b"x"), Create("/n/seq-", b"", sequence=True)])
    assert created == ["/n", "/n/seq-0000000000"]  # paths inside the chroot
    with pytest.raises(NoNode) as failed:
        await a.multi([Create("/m", b"y"), Check("/absent", 0)])
    assert failed.value.index == 1
    assert await a.exists("/m") is None


async def test_a_deposed_controllers_fenced_write_fails(clients):
    a, b = await clients(2)
    path = zkdata.partition_state_path("t", 0)
    await a.ensure_path(path.rsplit("/", 1)[0])
    await a.create(path, zkdata.PartitionState(1, 0, (1,), 0).encode())
    epoch_a, fence_a = await a.elect_controller(1, 1000)
    (st,) = await a.multi_fenced([SetData(path, zkdata.PartitionState(1, 1, (1,), epoch_a)
                                          .encode(), 0)], fence_a)
    assert st.version == 1
    # a loses /controller (as when its session expires) and b is elected with epoch + 1
    await b.delete(zkdata.CONTROLLER)
    epoch_b, fence_b = await b.elect_controller(2, 2000)
    assert epoch_b == epoch_a + 1
    with pytest.raises(ControllerMoved):
        await a.multi_fenced([SetData(path, zkdata.PartitionState(1, 2, (1,), epoch_a)
                                      .encode(), 1)], fence_a)
    data, st = await b.get(path)
    assert zkdata.PartitionState.decode(data).leader_epoch == 1 and st.version == 1
    (st,) = await b.multi_fenced([SetData(path, zkdata.PartitionState(1, 2, (1,), epoch_b)
                                          .encode(), 1)], fence_b)
    assert st.version == 2


async def test_two_contenders_race_and_exactly_one_wins(clients):
    a, b = await clients(2)
    epoch, _ = await a.read_controller_epoch()
    assert epoch == zkdata.INITIAL_CONTROLLER_EPOCH
    for round_ in range(1, 6):
        outcomes = await asyncio.gather(a.elect_controller(1, round_), b.elect_controller(2, round_),
                                        return_exceptions=True)
        won = [(broker, o) for broker, o in zip((1, 2), outcomes) if isinstance(o, tuple)]
        lost = [o for o in outcomes if isinstance(o, ControllerMoved)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        winner, (new_epoch, fence) = won[0]
        assert new_epoch == epoch + 1
        data, cst = await a.get(zkdata.CONTROLLER)
        assert zkdata.ControllerRegistration.decode(data).broker_id == winner
        edata, est = await a.get(zkdata.CONTROLLER_EPOCH)
        assert (zkdata.decode_controller_epoch(edata), est.version) == (new_epoch, fence)
        epoch = new_epoch
        await a.delete(zkdata.CONTROLLER)  # the next round starts with no controller


async def test_checked_ephemeral_create(clients):
    a, b = await clients(2)
    await a.ensure_path(zkdata.BROKER_IDS)
    path = zkdata.broker_path(1)
    czxid = await a.checked_ephemeral_create(path, b"{}")
    assert await a.checked_ephemeral_create(path, b"{}") == czxid  # ours already
    with pytest.raises(NodeExists):
        await b.checked_ephemeral_create(path, b"{}")  # another session's
    await a.close()
    assert await b.exists(path) is None  # a closed session's ephemerals go at once
    assert await b.checked_ephemeral_create(path, b"{}") > czxid


async def test_a_frozen_brokers_registration_vanishes_when_its_session_expires(connect, clients):
    (watcher,) = await clients(1)
    await watcher.ensure_path(zkdata.BROKER_IDS)
    path = zkdata.broker_path(7)
    holder = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests", "cluster", "zk_holder.py"), connect,
         str(SESSION_MS), path], stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT})
    try:
        line = await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 30)
        assert line.startswith("ready"), line
        st = await watcher.exists(path, watch=True)
        assert st is not None and st.ephemeral_owner == int(line.split()[1])
        assert zkdata.BrokerRegistration.decode(7, (await watcher.get(path))[0]).broker_id == 7
        os.kill(holder.pid, signal.SIGSTOP)  # no more heartbeats: the server expires it
        event = await asyncio.wait_for(next_watch(watcher), SESSION_MS / 1000 * 3 + 5)
        assert event == WatchEvent("DELETED", path)
        assert await watcher.exists(path) is None
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait(10)


async def test_the_event_loop_does_no_zookeeper_io(clients, monkeypatch):
    """Socket I/O happens on kazoo's threads, and the loop's thread never waits for a result
    or for kazoo's blocking start/stop: the calls that would block are observed (the real
    ones run) to learn which thread made them."""
    from kazoo.client import KazooClient
    from kazoo.handlers.utils import AsyncResult
    from kazoo.protocol.connection import ConnectionHandler
    calls: list[tuple[str, int]] = []
    for cls, name in ((ConnectionHandler, "_write"), (ConnectionHandler, "_read"),
                      (AsyncResult, "get"), (AsyncResult, "wait"),
                      (KazooClient, "start"), (KazooClient, "stop"), (KazooClient, "close")):
        real = getattr(cls, name)

        def observed(self, *args, _real=real, _name=name, **kw):
            calls.append((_name, threading.get_ident()))
            return _real(self, *args, **kw)
        monkeypatch.setattr(cls, name, observed)
    (a,) = await clients(1)
    await a.ensure_persistent_paths()
    await a.elect_controller(1, 1)
    await a.checked_ephemeral_create(zkdata.broker_path(1), b"{}")
    await a.set(zkdata.PRODUCER_ID_BLOCK, zkdata.ProducerIdBlock(1, 0, 999).encode())
    assert (await a.children(zkdata.BROKER_IDS)) == ["1"]
    await a.close()
    loop_thread = threading.get_ident()
    assert {"_write", "_read", "start", "stop"} <= {name for name, _ in calls}
    assert [name for name, thread in calls if thread == loop_thread] == []


async def test_session_states_reach_the_loop(clients):
    (a,) = await clients(1)
    # kazoo reports CONNECTED from its own thread: it arrives through the queue
    assert await asyncio.wait_for(a.events.get(), 10) == SessionEvent("CONNECTED")


def test_connect_strings_split_into_hosts_and_chroot():
    assert split_connect("h1:1,h2:2/kafka/x") == ("h1:1,h2:2", "/kafka/x")
    assert split_connect("h:1") == ("h:1", "")
    assert split_connect("h:1/") == ("h:1", "")
    assert split_connect("h:1/kl/") == ("h:1", "/kl")
