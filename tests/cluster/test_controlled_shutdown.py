# Controlled shutdown in a ZooKeeper cluster (issue 17, design step 9): three spawned kafkalite
# brokers on the test's chroot. A SIGTERMed broker asks the controller (ControlledShutdown,
# key 7) to move leadership and ISR membership off it before it leaves, as a Kafka 3.8 broker
# in ZooKeeper mode does; what lands in the state znodes is read back with kazoo. The request
# itself is also sent raw, to kafkalite and to Apache Kafka 3.8 in ZooKeeper mode, with the
# same answers.
from __future__ import annotations

import threading
import time
import uuid

import pytest

from kafkalite.cluster import zkdata
from kafkalite.cluster.controlled_shutdown import send_request
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_zk_admin_apis import create, settled_controller, states
from tests.helpers import real_kafka, zookeeper as zkh
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

QUIET = {"auto.leader.rebalance.enable": "false"}  # leadership moves only as the test says


def host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def ask(bootstrap: str, broker_id: int, epoch: int, version: int = 3):
    import asyncio
    return asyncio.run(send_request(*host_port(bootstrap), broker_id, epoch, version))


def api_range(bootstrap: str, key: int) -> tuple[int, int] | None:
    from tests.integration.test_groups_helpers import RawClient
    c = RawClient(bootstrap)
    try:
        got = c.call(18, 3, client_software_name="cs", client_software_version="1").api_keys
    finally:
        c.close()
    return next(((k.min_version, k.max_version) for k in got if k.api_key == key), None)


def leaders(z: Zk, topic: str, partitions: int) -> dict[int, zkdata.PartitionState]:
    return states(z, topic, range(partitions))


def cluster(brokers, zk, **settings):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **{**QUIET, **settings})))
    z = zk()
    registered(z, {1, 2, 3})
    return procs, z, settled_controller(z, procs)


def test_sigterm_moves_leadership_off_the_broker_before_its_registration_goes(brokers, zk):
    procs, z, cid = cluster(brokers, zk)
    topic = f"cs-{uuid.uuid4().hex[:6]}"
    assert create(procs[cid].bootstrap, topic, partitions=6, rf=3).error_code == 0
    before = eventually(lambda: leaders(z, topic, 6), lambda s: len(s) == 6, timeout=WAIT_S)
    victim = next(b for b in (1, 2, 3) if b != cid and any(
        s.leader == b for s in before.values()))

    # ZooKeeper delivers one session's watch events in the order of the changes: the state
    # znodes must change before the victim's registration is deleted.
    events: list[tuple[str, str]] = []
    lock = threading.Lock()

    def record(event) -> None:
        with lock:
            events.append((event.type, event.path))
    for p in before:
        z.client.get(zkdata.partition_state_path(topic, p), watch=record)
    z.client.exists(zkdata.broker_path(victim), watch=record)

    assert procs[victim].stop() == 0
    gone = ("DELETED", zkdata.broker_path(victim))
    eventually(lambda: list(events), lambda e: gone in e, timeout=WAIT_S)
    with lock:
        order = list(events)
    changed = {path for kind, path in order[:order.index(gone)] if kind == "CHANGED"}
    assert {zkdata.partition_state_path(topic, p) for p in before} <= changed, order

    after = leaders(z, topic, 6)
    for p, s in after.items():
        assert s.leader != victim and victim not in s.isr, (p, s)
        # a new leader, or the victim out of the ISR: either bumps the leader epoch, once
        assert s.leader_epoch == before[p].leader_epoch + 1, (p, s)
        assert s.isr == tuple(r for r in before[p].isr if r != victim), (p, s)
    log = procs[victim].read_log()
    assert "Controlled shutdown request returned successfully after 1 attempt" in log


def test_controlled_shutdown_answers_as_kafka_in_zookeeper_mode(brokers, zk, zookeeper):
    """Raw ControlledShutdown at every version: kafkalite's controller, another kafkalite
    broker and a Kafka 3.8 ZooKeeper-mode controller; ApiVersions lists key 7 alike."""
    if (reason := real_kafka.unavailable_reason()) is not None:
        pytest.skip(reason)
    procs, z, cid = cluster(brokers, zk)
    other = next(b for b in procs if b != cid)
    epoch = z.brokers()[other][1]
    kafka = zkh.ZkModeKafka(f"{zookeeper}/kafka-cs-{uuid.uuid4().hex}", broker_id=0,
                            settings=QUIET)
    try:
        kafka.start()
        kafka_epoch = eventually(lambda: kafka_broker_epoch(kafka), lambda e: e is not None,
                                 timeout=WAIT_S)
        assert api_range(procs[cid].bootstrap, 7) == api_range(kafka.bootstrap, 7) == (0, 3)
        for v in range(4):
            # a broker that is not registered; a live one asking with an older epoch (v2+)
            ours = ask(procs[cid].bootstrap, 99, -1, v)
            theirs = eventually(lambda: ask(kafka.bootstrap, 99, -1, v),
                                lambda r: r[0] != ErrorCode.not_controller, timeout=WAIT_S)
            assert ours == theirs == (ErrorCode.broker_not_available, []), v
            if v >= 2:
                assert ask(procs[cid].bootstrap, other, epoch - 1, v) == \
                    ask(kafka.bootstrap, 0, kafka_epoch - 1, v) == \
                    (ErrorCode.stale_broker_epoch, []), v
            assert ask(procs[other].bootstrap, other, epoch, v) == \
                (ErrorCode.not_controller, []), v
    finally:
        kafka.cleanup()
    # a stale request changed nothing: the broker still leads and is in sync
    assert z.brokers()[other][1] == epoch


def kafka_broker_epoch(kafka) -> int | None:
    from kazoo.client import KazooClient
    c = KazooClient(hosts=kafka.zookeeper_connect, timeout=10.0)
    c.start(timeout=10.0)
    try:
        st = c.exists(zkdata.broker_path(0))
        return None if st is None else st.czxid
    finally:
        c.stop()
        c.close()


def test_single_node_neither_serves_nor_advertises_controlled_shutdown(broker_process):
    assert api_range(broker_process.bootstrap, 7) is None
    with pytest.raises(Exception):
        ask(broker_process.bootstrap, 1, -1, 3)


def test_rolling_restart_acks_all_producer_sees_no_failed_delivery(brokers, zk):
    """Each broker in turn is SIGTERMed and started again while an acks=all producer with
    retries sends: leadership moves off each broker as it stops, and every record sent is
    delivered (replication's own guarantees are tested with it)."""
    from confluent_kafka import Producer
    procs, z, cid = cluster(brokers, zk, **{"controlled.shutdown.retry.backoff.ms": "500"})
    topic = f"roll-{uuid.uuid4().hex[:6]}"
    assert create(procs[cid].bootstrap, topic, partitions=3, rf=3).error_code == 0
    eventually(lambda: leaders(z, topic, 3), lambda s: len(s) == 3, timeout=WAIT_S)
    producer = Producer({"bootstrap.servers": ",".join(p.bootstrap for p in procs.values()),
                         "acks": "all", "retries": 1000, "enable.idempotence": False,
                         "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 1000})
    failed: list[str] = []
    delivered = [0]

    def report(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            delivered[0] += 1
    sent = 0

    def send_for(seconds: float) -> None:
        nonlocal sent
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            producer.produce(topic, f"v{sent}".encode(), partition=sent % 3, on_delivery=report)
            sent += 1
            producer.poll(0.01)

    send_for(1.0)
    moved_off = set()
    for b in (1, 2, 3):
        # Followers rejoin the ISR by replication's ISR expansion: given a little time here,
        # they make every partition movable; without it only those with another in-sync
        # replica can move (the others stay with b, the answer's remaining partitions).
        now = eventually(lambda: leaders(z, topic, 3),
                         lambda st: all(len(x.isr) == 3 for x in st.values()), timeout=5)
        movable = [p for p, x in now.items() if x.leader == b and len(x.isr) > 1]
        stopper = threading.Thread(target=procs[b].stop)
        stopper.start()
        while stopper.is_alive():
            send_for(0.2)
        stopper.join()
        after = leaders(z, topic, 3)
        assert all(after[p].leader not in (b, -1) for p in movable), (b, now, after)
        if len(movable) == sum(x.leader == b for x in now.values()):
            moved_off.add(b)
        procs[b].start()
        registered(z, {1, 2, 3})
        send_for(1.0)
    assert producer.flush(60) == 0
    assert not failed, failed[:5]
    assert delivered[0] == sent > 0
    assert moved_off  # the first broker at least: every ISR was full then
    for b in moved_off:
        assert "Controlled shutdown request returned successfully" in procs[b].read_log(), b


def test_controlled_shutdown_needs_cluster_action_on_the_cluster(brokers, zk):
    """With an authorizer, a principal without CLUSTER_ACTION on the cluster is refused
    (CLUSTER_AUTHORIZATION_FAILED, no partitions); a super user is let through to the
    controller's own checks (the ACL matrix's entry for key 7 points here)."""
    secured = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
               "controlled.shutdown.enable": "false"}
    (denied,) = brokers(1, **secured)
    (allowed,) = brokers(2, **secured, **{"super.users": "User:ANONYMOUS"},
                         zk_connect=f"{zk_connect_of(denied)}-2")
    z = zk()
    registered(z, {1})
    eventually(lambda: ask(denied.bootstrap, 99, -1), lambda r: r[0] != 41, timeout=WAIT_S)
    for v in range(4):
        assert ask(denied.bootstrap, 99, -1, v) == (ErrorCode.cluster_authorization_failed, [])
    got = eventually(lambda: ask(allowed.bootstrap, 99, -1),
                     lambda r: r[0] != ErrorCode.not_controller, timeout=WAIT_S)
    assert got == (ErrorCode.broker_not_available, [])


def zk_connect_of(proc) -> str:
    return proc.settings["zookeeper.connect"]


# --- the state znodes against Kafka 3.8's ZooKeeper-mode controller -------------------------

async def _cs_play(connect: str, bootstrap: str) -> list:
    """Broker 0 (the controller, no replicas) and simulated brokers 1 and 2: broker 1 asks for
    a controlled shutdown. The answers and the state znodes after each step (every field but
    controller_epoch, with the znode version)."""
    import asyncio

    from kafkalite.cluster import admin_zk
    from kafkalite.cluster.zk import ZkClient
    from tests.cluster.test_controller import SESSION_MS, register, states as zstates
    from tests.cluster.test_controller import eventually as aeventually

    admin = ZkClient(connect, SESSION_MS)
    await admin.start()
    sessions = [admin]
    out: list = []

    async def snap(topic: str, accept=lambda s: True):
        got = await aeventually(lambda: zstates(admin, topic), accept, timeout=30)
        await asyncio.sleep(1.0)  # a second write of the same step would show too
        got = await zstates(admin, topic)
        out.append({p: (s.leader, s.leader_epoch, s.isr, v) for p, (s, v) in got.items()})

    try:
        await admin.ensure_persistent_paths()
        one, two = await register(connect, 1), await register(connect, 2)
        sessions += [one, two]
        await admin_zk.create_topic(admin, "u", 1, 2, assignment={0: [1, 2]})
        await snap("u", lambda s: len(s) == 1)
        await two.close()  # u-0: 1 alone in sync
        await snap("u", lambda s: s[0][0].isr == (1,))
        sessions.append(await register(connect, 2))
        await asyncio.sleep(1.5)  # the controller has taken 2 in
        await admin_zk.create_topic(admin, "t", 2, 2, assignment={0: [1, 2], 1: [2, 1]})
        await admin_zk.create_topic(admin, "v", 1, 1, assignment={0: [1]})
        await snap("t", lambda s: len(s) == 2)
        await snap("v", lambda s: len(s) == 1)
        epoch = (await one.exists(zkdata.broker_path(1))).czxid
        code, remaining = await asyncio.to_thread(ask, bootstrap, 1, epoch)
        out.append((code, sorted(remaining)))
        await snap("t", lambda s: s[0][0].leader == 2)
        await snap("u")
        await snap("v")
        return out
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def against_kafka(zookeeper: str, play) -> tuple[list, list]:
    """play(connect, bootstrap) on two chroots: one whose broker 0 (and controller) is Apache
    Kafka 3.8 in ZooKeeper mode, one whose broker 0 is kafkalite; (ours, theirs), compared
    step by step."""
    import asyncio

    from kafkalite.testing import BrokerProcess
    from tests.cluster.test_controller import SESSION_MS
    if (reason := real_kafka.unavailable_reason()) is not None:
        pytest.skip(reason)
    kafka_connect = f"{zookeeper}/kafka-vs-{uuid.uuid4().hex}"
    kafka = zkh.ZkModeKafka(kafka_connect, broker_id=0, settings=QUIET)
    lite_connect = f"{zookeeper}/kl-vs-{uuid.uuid4().hex}"
    lite = BrokerProcess(port=real_kafka.free_port_pair(), settings={
        "node.id": "0", "zookeeper.connect": lite_connect,
        "zookeeper.session.timeout.ms": str(SESSION_MS), **QUIET})
    try:
        await asyncio.to_thread(kafka.start)
        await asyncio.to_thread(lite.start)
        theirs = await play(kafka_connect, kafka.bootstrap)
        ours = await play(lite_connect, lite.bootstrap)
    finally:
        kafka.cleanup()
        lite.cleanup()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"step {i}: kafkalite {a} / Kafka {b}"
    return ours, theirs


async def test_controlled_shutdown_states_match_kafka(zookeeper):
    ours, theirs = await against_kafka(zookeeper, _cs_play)
    assert len(ours) == len(theirs) == 8
    # what the comparison rests on: u-0 stays with 1 (no other in-sync replica) and is
    # answered; t-0 moves to 2, 1 leaves t-1's ISR, the single-replica v-0 is left alone
    assert theirs[4] == (0, [("u", 0)])
    assert theirs[5] == {0: (2, 1, (2,), 1), 1: (2, 1, (2,), 1)}
    assert theirs[6] == theirs[1] and theirs[7] == theirs[3]
