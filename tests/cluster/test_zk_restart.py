# A ZooKeeper restart under a kafkalite cluster (issue 17): the test's own ZooKeeper server
# (not the session's shared one) is stopped and started again on the same data directory,
# once for less than the brokers' session timeout and once for several timeouts. While it is
# down the partition leader keeps serving produce (acks=1, and acks=all while the ISR needs no
# change) and fetch, as Kafka's brokers do; an ISR shrink the leader could not write then is
# written once ZooKeeper is back. Afterwards every broker is registered (in its old session, or
# under a new broker epoch when that session expired), a controller is elected, a SIGKILLed
# leader fails over, and no acknowledged record is lost.
from __future__ import annotations

import time

import pytest

from tests.cluster.test_membership import (SESSION_MS, WAIT_S, Zk, brokers,  # noqa: F401
                                           registered)
from tests.cluster.test_replication import (TOPIC, bootstrap, consume_all, resume, state,
                                            stop)
from tests.cluster.test_zk_admin_apis import controller_id, create
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.kbatch import fetch_raw
from tests.helpers.real_kafka import eventually
from tests.helpers.zookeeper import ZooKeeperProcess, chroot_connect

LAG_MS = 2000
SESSION_4S = 4000  # the in-process controller's session
SETTINGS = {"replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.wait.max.ms": "200",
            "replica.high.watermark.checkpoint.interval.ms": "300",
            "auto.leader.rebalance.enable": "false"}


@pytest.fixture
def server(tmp_path):
    zk = ZooKeeperProcess(data_dir=str(tmp_path / "zk")).start()
    yield zk
    zk.cleanup()


@pytest.fixture
def connect(server):  # the membership fixtures' chroot, on this test's own server
    return chroot_connect(server.connect)


class Producer:
    """confluent-kafka at one acks setting; records what was acknowledged."""

    def __init__(self, servers: str, acks: str):
        import confluent_kafka as ck
        self.p = ck.Producer({"bootstrap.servers": servers, "acks": acks, "linger.ms": 2,
                              "enable.idempotence": acks == "all",
                              "message.timeout.ms": 60000})
        self.acked: list[bytes] = []
        self.failed: list = []

    def _report(self, err, msg) -> None:
        (self.failed.append(err) if err is not None else self.acked.append(msg.value()))

    def send(self, values) -> None:
        for v in values:
            self.p.produce(TOPIC, value=v, partition=0, on_delivery=self._report)
        self.p.poll(0)

    def wait_acked(self, count: int, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while len(self.acked) + len(self.failed) < count and time.monotonic() < deadline:
            self.p.poll(0.1)
        return len(self.acked)


def setup(procs: dict, connect: str):
    """An RF=3 topic (min.insync.replicas=2) with its ISR complete on brokers `procs` (1-3):
    (its first state, {broker: (broker epoch, session)})."""
    z = Zk(connect)
    try:
        registered(z, {1, 2, 3})
        cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
        assert create(procs[cid].bootstrap, TOPIC, partitions=1, rf=3,
                      configs={"min.insync.replicas": "2"}).error_code == 0
        first = eventually(lambda: state(z), lambda s: set(s.isr) == {1, 2, 3},
                           timeout=WAIT_S)
        before = {i: (e, owner) for i, (_, e, owner) in registered(z, {1, 2, 3}).items()}
    finally:
        z.close()  # it would block on the stopped server: a fresh one reads afterwards
    return first, before


def fetched(broker, offset: int) -> int:
    """Records a consumer fetch of the leader returns from `offset` (raw Fetch)."""
    with open_socket(broker.bootstrap) as s:
        part = fetch_raw(s, TOPIC, 0, offset)
    assert part.error_code == 0, part
    return part.high_watermark


def restart_scenario(procs: dict, connect: str, server: ZooKeeperProcess, down_s: float,
                     shrink: bool, wait_s: float = WAIT_S):
    """Brokers 1-3 (kafkalite's or Kafka's) on `server` at `connect`: ZooKeeper stopped for
    `down_s`, a follower stopped meanwhile when `shrink`. (controller, sessions before,
    registrations after, that follower). Every wait is bounded by `wait_s`."""
    first, before = setup(procs, connect)
    leader = procs[first.leader]
    follower = next(i for i in first.isr if i != first.leader)
    all_p, one_p = Producer(leader.bootstrap, "all"), Producer(leader.bootstrap, "1")
    all_p.send([b"before-%d" % i for i in range(50)])
    assert all_p.wait_acked(50, wait_s) == 50

    server.stop()
    t0 = time.monotonic()
    # ZooKeeper is down: the leader serves produce at both acks settings, and fetch
    all_p.send([b"down-all-%d" % i for i in range(100)])
    one_p.send([b"down-one-%d" % i for i in range(100)])
    assert all_p.wait_acked(150, wait_s) == 150, all_p.failed[:3]
    assert one_p.wait_acked(100, wait_s) == 100, one_p.failed[:3]
    # the followers fetched it all: the HW moved without ZooKeeper
    assert eventually(lambda: fetched(leader, 0), lambda hw: hw >= 250, timeout=wait_s) >= 250
    if shrink:  # a follower stops: the leader's ISR shrink cannot reach ZooKeeper
        stop(procs[follower])
        all_p.send([b"shrink-%d" % i for i in range(20)])
    time.sleep(max(0.0, down_s - (time.monotonic() - t0)))
    server.start()

    z = Zk(connect)
    try:
        if shrink:  # written once ZooKeeper is back (by the leader, or the controller
            # once the stopped follower's session has expired), then acks=all completes
            eventually(lambda: state(z), lambda s: follower not in s.isr, timeout=wait_s)
            assert all_p.wait_acked(170, wait_s) == 170, all_p.failed[:3]
            resume(procs[follower])
            eventually(lambda: state(z), lambda s: follower in s.isr, timeout=wait_s)
        after = eventually(z.brokers, lambda seen: set(seen) == {1, 2, 3}, timeout=wait_s)
        for i, (_, epoch, owner) in after.items():  # the same session, or a new epoch
            assert (epoch, owner) == before[i] or (epoch > before[i][0] and
                                                   owner != before[i][1]), (i, before, after)
        cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=wait_s)
        now = eventually(lambda: state(z), lambda s: set(s.isr) == {1, 2, 3}, timeout=wait_s)

        # the controller works again: the leader's SIGKILL moves leadership in the ISR
        procs[now.leader].kill()
        new = eventually(lambda: state(z), lambda s: s.leader not in (now.leader, -1),
                         timeout=wait_s)
        assert new.leader_epoch > now.leader_epoch and new.leader in now.isr
    finally:
        z.close()
    live = {k: b for k, b in procs.items() if k != now.leader}
    acked = all_p.acked + one_p.acked
    got = consume_all(bootstrap(live), len(acked), timeout=wait_s)
    assert set(acked) <= set(got)  # no acknowledged record lost
    assert not all_p.failed and not one_p.failed
    return cid, before, after, follower


def test_zookeeper_down_shorter_than_the_session_timeout(brokers, connect, server):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS)))
    _, before, after, _ = restart_scenario(procs, connect, server, down_s=SESSION_MS / 2000,
                                        shrink=False)
    assert {i: (e, o) for i, (_, e, o) in after.items()} == before  # the sessions survived


def test_zookeeper_down_longer_than_the_session_timeout(brokers, connect, server):
    # ZooKeeper restores its sessions from its data directory with a fresh timeout, and the
    # brokers reconnect within a second or so (zk.RECONNECT_MAX_DELAY_S), as Kafka's do: the
    # running brokers keep their sessions. A 4 s session leaves them room on a loaded
    # machine (the in-process test below is the one that fails with kazoo's own backoff).
    session_ms = 2 * SESSION_MS
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS, **{
        "zookeeper.session.timeout.ms": str(session_ms)})))
    _, before, after, stopped = restart_scenario(
        procs, connect, server, down_s=3 * session_ms / 1000, shrink=True)
    running = sorted(set(procs) - {stopped})
    assert {i: after[i][1:] for i in running} == {i: before[i] for i in running}
    # the leader wrote the shrink itself once ZooKeeper was back (its write had waited)
    assert sum("Shrinking ISR of replicated-0" in b.read_log() for b in procs.values()) == 1


async def test_the_controller_follows_zookeeper_again_after_a_connection_loss(server):
    """In-process: kazoo drops every watch when the connection goes (a watch event without a
    path); the controller must survive it and act on the znodes once ZooKeeper is back. Down
    for three session timeouts, the session survives: ZooKeeper restores it with a fresh
    timeout and the client is back within about a second (kazoo's own backoff would have
    waited about as long again as the outage had lasted, and found the session expired)."""
    import asyncio

    from kafkalite.cluster import admin_zk
    from kafkalite.cluster.controller import Controller
    from kafkalite.cluster.zk import ZkClient
    from tests.cluster.test_controller import active, register, wait_states
    from tests.cluster.test_controller import eventually as eventually_async

    connect = chroot_connect(server.connect)
    sessions = [await register(connect, b) for b in (1, 2)]
    ctl_zk = ZkClient(connect, SESSION_4S)
    await ctl_zk.start()
    ctl = Controller(ctl_zk, 1)
    await ctl.start()
    try:
        assert await eventually_async(lambda: active(ctl), bool)
        session, epoch = ctl_zk.session_id, ctl.epoch
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, server.stop)
        await asyncio.sleep(3 * SESSION_4S / 1000)
        await loop.run_in_executor(None, server.start)
        assert await eventually_async(lambda: asyncio.sleep(0, ctl_zk.connected), bool,
                                      timeout=WAIT_S)
        assert (ctl_zk.session_id, ctl.active, ctl.epoch) == (session, True, epoch)
        admin = ZkClient(connect, SESSION_4S)
        await admin.start()
        sessions.append(admin)
        await admin_zk.create_topic(admin, "after", 1, 2, assignment={0: [2, 1]})
        got = await wait_states(admin, "after", lambda s: len(s) == 1)
        assert got[0][0].leader == 2 and set(got[0][0].isr) == {1, 2}
    finally:
        await ctl.stop()
        await asyncio.gather(*(s.close() for s in [*sessions, ctl_zk]))
