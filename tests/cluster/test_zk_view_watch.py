# The cluster view of an in-process broker follows ZooKeeper's znodes through watches: a
# partition state written after its assignment, a state change, an assignment that gains a
# partition, a topic's deletion, the controller's arrival and departure; a topic with a replica
# on the broker gets a local log with the cluster's topic id before the view shows it, one
# without none. Real ZooKeeper, the test writing the znodes as Kafka's controller would.
from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kazoo.client import KazooClient

from kafkalite.cluster import zkdata
from kafkalite.cluster.view import PartitionState
from kafkalite.cluster.zk_view import topic_uuid
from kafkalite.config import BrokerConfig
from kafkalite.log.datadir import uuid_b64
from kafkalite.server import KafkaServer
from tests.cluster.test_membership import SESSION_MS, WAIT_S, connect  # noqa: F401
from tests.helpers.real_kafka import free_port_pair


async def until(probe, bound_s: float = WAIT_S):
    deadline = time.monotonic() + bound_s
    while not probe() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return probe()


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> bytes:
    return zkdata.PartitionState(leader, epoch, isr, 1).encode()


@pytest.fixture
async def broker_and_zk(connect, tmp_path):
    """An in-process broker 1 on the test's chroot, and a kazoo session there."""
    server = KafkaServer(BrokerConfig({
        "node.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port_pair()}",
        "log.dirs": str(tmp_path / "1"), "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "kafkalite.controller.enable": "false",  # the test plays the controller
        "controlled.shutdown.enable": "false"}))  # so none answers at the end
    await server.start()
    z = KazooClient(hosts=connect, timeout=10.0)
    try:
        await asyncio.to_thread(z.start, 10.0)
        yield server, z
    finally:
        await asyncio.to_thread(z.stop)
        z.close()
        await server.stop()


async def test_the_view_follows_assignments_states_and_the_controller(broker_and_zk):
    server, z = broker_and_zk
    view, logs = server.broker.view, server.broker.logs
    assert view.controller_id == -1 and view.topic_names() == []
    assert [n.node_id for n in view.brokers(None)] == [1]

    tid = uuid_b64(uuid.uuid4())
    # broker 1 holds partition 1's replica only; the states come after the assignment
    await asyncio.to_thread(z.create, zkdata.topic_path("t"), zkdata.TopicAssignment(
        {0: (2,), 1: (1, 2)}, tid).encode(), makepath=True)
    assert await until(lambda: view.topic("t") is not None)
    assert view.partition("t", 1) == PartitionState(-1, -1, (1, 2), (), (2,))
    local = logs.get("t")  # created before the view showed the topic
    assert local is not None and local.topic_id == topic_uuid(tid) == view.topic("t").topic_id
    assert not view.is_leader("t", 1)
    for p, leader in ((0, 2), (1, 1)):
        await asyncio.to_thread(z.create, zkdata.partition_state_path("t", p),
                                state(leader, 0, (leader,)), makepath=True)
    assert await until(lambda: view.is_leader("t", 1))
    assert view.partition("t", 0) == PartitionState(2, 0, (2,), (2,), (2,))
    assert view.leader_error("t", 1, -1) == 0 and view.leader_error("t", 0, -1) == 6

    await asyncio.to_thread(z.set, zkdata.partition_state_path("t", 1), state(2, 1, (1, 2)))
    assert await until(lambda: view.partition("t", 1).leader == 2)
    assert view.leader_error("t", 1, 0) == 74  # FENCED_LEADER_EPOCH before the leader check
    assert view.leader_error("t", 1, 1) == 6

    await asyncio.to_thread(z.set, zkdata.topic_path("t"), zkdata.TopicAssignment(
        {0: (2,), 1: (1, 2), 2: (1,)}, tid).encode())
    await asyncio.to_thread(z.create, zkdata.partition_state_path("t", 2),
                            state(1, 0, (1,)), makepath=True)
    assert await until(lambda: view.is_leader("t", 2))
    assert len(logs.get("t").partitions) == 3

    # a topic without a replica here: in the view, not on disk
    await asyncio.to_thread(z.create, zkdata.topic_path("u"), zkdata.TopicAssignment(
        {0: (3,)}, uuid_b64(uuid.uuid4())).encode(), makepath=True)
    assert await until(lambda: view.topic("u") is not None)
    assert logs.get("u") is None and view.leader_error("u", 0, -1) == 6
    assert sorted(view.topic_names()) == ["t", "u"]

    await asyncio.to_thread(z.create, zkdata.CONTROLLER,
                            zkdata.ControllerRegistration(3, 0).encode(), ephemeral=True)
    assert await until(lambda: view.controller_id == 3)
    await asyncio.to_thread(z.delete, zkdata.CONTROLLER)
    assert await until(lambda: view.controller_id == -1)

    await asyncio.to_thread(z.delete, zkdata.topic_path("u"), recursive=True)
    assert await until(lambda: view.topic("u") is None)
    assert view.leader_error("u", 0, -1) == 3 and view.partitions("u") == ()


async def test_the_view_reads_everything_again_after_its_session_expired(broker_and_zk,
                                                                        connect):
    """A lost session loses its watches: what changed meanwhile, and after, still arrives."""
    server, z = broker_and_zk
    view = server.broker.view
    await asyncio.to_thread(z.create, zkdata.topic_path("t"), zkdata.TopicAssignment(
        {0: (2,)}, uuid_b64(uuid.uuid4())).encode(), makepath=True)
    await asyncio.to_thread(z.create, zkdata.partition_state_path("t", 0),
                            state(2, 0, (2,)), makepath=True)
    assert await until(lambda: view.partition("t", 0).leader == 2)
    old_session = view.client.session_id
    # ZooKeeper expires a session when another client closes a connection made with the
    # same id and password (the standard way to force an expiry)
    sid, password = view.client._kazoo.client_id
    twin = KazooClient(hosts=connect, client_id=(sid, password), timeout=10.0)
    await asyncio.to_thread(twin.start, 10.0)
    await asyncio.to_thread(twin.stop)
    twin.close()
    await asyncio.to_thread(z.set, zkdata.partition_state_path("t", 0), state(3, 1, (3,)))
    assert await until(lambda: view.client.session_id not in (0, old_session))
    assert await until(lambda: view.partition("t", 0).leader == 3)
    await asyncio.to_thread(z.set, zkdata.partition_state_path("t", 0), state(2, 2, (2,)))
    assert await until(lambda: view.partition("t", 0).leader_epoch == 2)  # watches re-armed
