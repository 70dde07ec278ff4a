# Brokers joining a ZooKeeper-coordinated cluster (issue 17, step 3): spawned kafkalite brokers
# with zookeeper.connect (each test on a chroot of its own on the session ZooKeeper) register
# under Kafka's layout, read back with kazoo and decoded with zkdata; a broker's registration
# lives as long as its session; a broker whose id is taken, whose data directory belongs to
# another cluster, or that cannot reach ZooKeeper exits 1 with one clear line, as Kafka does.
from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time

import pytest

from kafkalite.cluster import zkdata
from kafkalite.config import BrokerConfig
from kafkalite.server import KafkaServer
from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import eventually, free_port_pair
from tests.helpers.zookeeper import MIN_SESSION_TIMEOUT_MS, ZooKeeperProcess, chroot_connect

SESSION_MS = max(2000, MIN_SESSION_TIMEOUT_MS)  # the failure tests' failover time
CONNECT_MS = 1500
WAIT_S = 20.0  # bound of every wait: several session timeouts
# The tests' clusters (one to three brokers) keep one replica of the internal topics unless a
# test asks for more: the default, as Kafka's, is three (with transaction.state.log.min.isr 2)
ONE_REPLICA_INTERNAL = {"offsets.topic.replication.factor": "1",
                        "transaction.state.log.replication.factor": "1",
                        "transaction.state.log.min.isr": "1"}


class Zk:
    """A kazoo session on the test's chroot, for reading what the brokers wrote."""

    def __init__(self, connect: str):
        from kazoo.client import KazooClient
        self.client = KazooClient(hosts=connect, timeout=10.0)
        self.client.start(timeout=10.0)

    def brokers(self) -> dict[int, tuple[zkdata.BrokerRegistration, int, int]]:
        """id -> (registration, broker epoch (czxid), owning session)."""
        out = {}
        if self.client.exists(zkdata.BROKER_IDS) is None:
            return out
        for name in self.client.get_children(zkdata.BROKER_IDS):
            try:
                data, st = self.client.get(f"{zkdata.BROKER_IDS}/{name}")
            except Exception:  # NoNodeError: gone meanwhile
                continue
            out[int(name)] = (zkdata.BrokerRegistration.decode(int(name), data), st.czxid,
                              st.ephemeralOwner)
        return out

    def cluster_id(self) -> str:
        return zkdata.decode_cluster_id(self.client.get(zkdata.CLUSTER_ID)[0])

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def live_set(broker: BrokerProcess) -> list[int] | None:
    """The live broker ids the broker logged last (None before any)."""
    found = re.findall(r"Live brokers: \[([\d, ]*)\]", broker.read_log())
    return [int(i) for i in found[-1].split(",") if i.strip()] if found else None


def meta_cluster_id(broker: BrokerProcess) -> str | None:
    path = os.path.join(broker.data_dir, "meta.properties")
    with open(path) as f:
        return next((line.strip().split("=", 1)[1] for line in f
                     if line.startswith("cluster.id=")), None)


def exit_within(broker: BrokerProcess, timeout: float) -> tuple[int | None, str, float]:
    """Run the broker's command to its end (bounded): (exit code, stderr, seconds)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(broker.command(), capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return r.returncode, r.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        return None, str(e.stderr or ""), time.monotonic() - t0


@pytest.fixture
def connect(zookeeper):
    return chroot_connect(zookeeper)


@pytest.fixture
def zk(connect):
    # the chroot exists once a broker has joined; kazoo then reads inside it
    made: list[Zk] = []

    def open_() -> Zk:
        made.append(Zk(connect))
        return made[-1]
    yield open_
    for z in made:
        z.close()


@pytest.fixture
def brokers(connect):
    """brokers(id, ...) -> started BrokerProcesses on the test's chroot; killed at the end."""
    made: list[BrokerProcess] = []

    def make(*ids: int, start: bool = True, zk_connect: str | None = None,
             **settings: str) -> list[BrokerProcess]:
        new = [BrokerProcess(port=free_port_pair(), settings={
            "node.id": str(i), "zookeeper.connect": zk_connect or connect,
            "zookeeper.session.timeout.ms": str(SESSION_MS),
            "zookeeper.connection.timeout.ms": str(CONNECT_MS), **ONE_REPLICA_INTERNAL,
            **settings}) for i in ids]
        made.extend(new)
        if start:
            for b in new:
                b.start()
        return new
    yield make
    for b in made:
        b.kill()
        b.cleanup()


def registered(zk, ids) -> dict:
    return eventually(zk.brokers, lambda seen: set(seen) == set(ids), timeout=WAIT_S)


def test_three_brokers_register_their_endpoints_and_share_one_cluster_id(brokers, zk):
    b = brokers(1, 2, 3, **{"broker.rack": "rack-a"})
    z = zk()
    seen = registered(z, {1, 2, 3})
    assert set(seen) == {1, 2, 3}
    for i, broker in zip((1, 2, 3), b):
        reg, epoch, _ = seen[i]
        assert reg.endpoints == (zkdata.Endpoint("PLAINTEXT", "127.0.0.1", broker.port),)
        assert reg.security_protocols == {"PLAINTEXT": "PLAINTEXT"}
        assert reg.rack == "rack-a" and reg.version == 5 and epoch > 0
    assert len({epoch for _, epoch, _ in seen.values()}) == 3
    cluster_id = z.cluster_id()
    assert [meta_cluster_id(broker) for broker in b] == [cluster_id] * 3
    for broker in b:  # each one's live set holds all three
        assert eventually(lambda: live_set(broker), lambda s: s == [1, 2, 3],
                          timeout=WAIT_S) == [1, 2, 3]


def test_a_killed_broker_goes_after_its_session_and_rejoins_with_a_new_epoch(brokers, zk):
    b1, b2, b3 = brokers(1, 2, 3)
    z = zk()
    old_epoch = registered(z, {1, 2, 3})[3][1]
    b3.kill()
    assert set(registered(z, {1, 2})) == {1, 2}  # its ephemeral znode expired with it
    for broker in (b1, b2):
        assert eventually(lambda: live_set(broker), lambda s: s == [1, 2],
                          timeout=WAIT_S) == [1, 2]
    b3.start()
    seen = registered(z, {1, 2, 3})
    assert seen[3][1] > old_epoch
    assert eventually(lambda: live_set(b1), lambda s: s == [1, 2, 3], timeout=WAIT_S) \
        == [1, 2, 3]


def test_a_stopped_broker_deregisters_at_once(brokers, zk):
    (b1,) = brokers(1)
    z = zk()
    registered(z, {1})
    assert b1.stop() == 0
    assert z.brokers() == {}  # no session timeout to wait for: the session was closed


def test_a_second_broker_with_a_taken_id_exits_1_with_kafkas_message(brokers, zk):
    brokers(1)
    z = zk()
    owner = registered(z, {1})[1][2]
    (dup,) = brokers(1, start=False)
    code, err, _ = exit_within(dup, WAIT_S)
    assert code == 1, err
    assert (f"Error while creating ephemeral at /brokers/ids/1, node already exists and "
            f"owner '{owner}' does not match current session") in err
    assert z.brokers()[1][2] == owner  # the first one keeps its registration


def test_a_data_dir_of_another_cluster_is_refused(brokers, zk):
    brokers(1)
    z = zk()
    registered(z, {1})
    (other,) = brokers(2, start=False)
    with open(os.path.join(other.data_dir, "meta.properties"), "w") as f:
        f.write("version=1\ncluster.id=AnotherClusterIdAAAAAA\nnode.id=2\n")
    code, err, _ = exit_within(other, WAIT_S)
    assert code == 1, err
    assert (f"The Cluster ID {z.cluster_id()} doesn't match stored clusterId "
            f"Some(AnotherClusterIdAAAAAA) in meta.properties") in err
    assert set(z.brokers()) == {1}


def test_unreachable_zookeeper_exits_1_within_the_connection_timeout(brokers):
    nobody = f"127.0.0.1:{free_port_pair()}/kl"
    (b,) = brokers(1, start=False, zk_connect=nobody)
    code, err, took = exit_within(b, WAIT_S)
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("kafkalite:")]
    assert len(lines) == 1 and "Timed out waiting for connection to ZooKeeper" in lines[0]
    assert "Traceback" not in err
    # the connection timeout, plus the interpreter's start and imports
    assert took < CONNECT_MS / 1000 + 10, took


def test_zookeeper_paused_beyond_the_session_timeout_gets_a_new_registration(brokers,
                                                                               tmp_path):
    # After a pause, ZooKeeper races the client's reconnection (which would revive the session)
    # against its own expiry of that session: the broker is paused too while ZooKeeper
    # resumes, so the expiry wins, as it does whenever a client comes back too late.
    server = ZooKeeperProcess(data_dir=str(tmp_path / "zk")).start()
    try:
        connect = chroot_connect(server.connect)
        (b,) = brokers(1, zk_connect=connect)
        # the port answers before the start ends (the view and the controller read ZooKeeper)
        assert eventually(lambda: "kafkalite listening" in b.read_log(), bool, timeout=WAIT_S)
        z = Zk(connect)
        try:
            _, epoch, owner = registered(z, {1})[1]
        finally:
            z.close()
        server.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(3 * SESSION_MS / 1000)  # the broker's session is lost meanwhile
        finally:
            b.proc.send_signal(signal.SIGSTOP)
            server.proc.send_signal(signal.SIGCONT)
        z = Zk(connect)
        try:
            try:
                assert registered(z, set()) == {}  # ZooKeeper expired the session
            finally:
                b.proc.send_signal(signal.SIGCONT)
            seen = registered(z, {1})
            assert seen[1][2] != owner and seen[1][1] > epoch
        finally:
            z.close()
        assert "registering broker 1 again" in b.read_log()
        assert eventually(lambda: live_set(b), lambda s: s == [1], timeout=WAIT_S) == [1]
    finally:
        server.cleanup()


async def test_the_broker_object_holds_the_live_set(connect, tmp_path):
    """In-process brokers: broker.cluster_members is the live set, kept current."""
    def server(node_id: int) -> KafkaServer:
        return KafkaServer(BrokerConfig({
            "node.id": str(node_id), "listeners": f"PLAINTEXT://127.0.0.1:{free_port_pair()}",
            "log.dirs": str(tmp_path / str(node_id)), "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": str(SESSION_MS)}))

    async def until(probe, bound_s: float = WAIT_S):
        deadline = time.monotonic() + bound_s
        while not probe() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return probe()

    one, two = server(1), server(2)
    await one.start()
    try:
        await two.start()
        try:
            members = one.broker.cluster_members
            assert await until(lambda: set(members) == {1, 2})
            assert members[2].registration.endpoints == (
                zkdata.Endpoint("PLAINTEXT", "127.0.0.1", two.bound_port),)
            assert members[2].epoch == two.membership.broker_epoch
            assert one.broker.membership.cluster_id == two.broker.membership.cluster_id
        finally:
            await two.stop()
        assert await until(lambda: set(one.broker.cluster_members) == {1})
    finally:
        await one.stop()
