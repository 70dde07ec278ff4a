# A broker's ZooKeeper session expires while its process keeps running (issue 17): the session
# is ended from outside (tests/helpers/zookeeper.expire_session: a second client attaches to
# it with its password and closes it), for a follower, the partition leader and the
# controller of a 3-broker cluster with an RF=3 topic. The broker registers again under a new
# broker epoch; the controller handles it as Kafka's handles a bounced broker (failed, then
# started: out of every ISR, its leadership moved); it rejoins the ISR, the automatic
# preferred-leader election gives the leadership back, and an idempotent acks=all producer
# running throughout loses no acknowledged record. Its own controller component followed the
# new session too: once the other brokers are gone, it is the controller.
from __future__ import annotations

import threading
import time

import pytest
from kafka.protocol.admin import CreateTopicsRequest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_replication import TOPIC, bootstrap, consume_all, state
from tests.cluster.test_zk_admin_apis import controller_epoch, controller_id, settled_controller
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually
from tests.helpers.zookeeper import expire_session

SETTINGS = {"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
            "leader.imbalance.check.interval.seconds": "1"}


def create_assigned(servers: str, replicas: list[int]) -> None:
    """TOPIC with one partition on `replicas` (the first is its preferred leader); retried
    (bounded) while the broker asked has not seen all of them register yet."""
    row = eventually(lambda: create_once(servers, replicas),
                     lambda r: r.error_code != ErrorCode.invalid_replica_assignment,
                     timeout=WAIT_S)
    assert row.error_code == 0, row


def create_once(servers: str, replicas: list[int]):
    T = CreateTopicsRequest[7].CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=TOPIC, num_partitions=-1, replication_factor=-1,
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[T.CreatableTopicConfig(name="min.insync.replicas", value="2")])],
        timeout_ms=15000, validate_only=False)
    with open_socket(servers) as s:
        (row,) = call(s, req).topics
    return row


class BackgroundProducer:
    """An idempotent acks=all confluent-kafka producer sending until stopped."""

    def __init__(self, servers: str):
        import confluent_kafka as ck
        self.p = ck.Producer({"bootstrap.servers": servers, "acks": "all",
                              "enable.idempotence": True, "linger.ms": 5,
                              "message.timeout.ms": 60000})
        self.acked: list[bytes] = []
        self.failed: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, err, msg) -> None:
        (self.failed.append(err) if err is not None else self.acked.append(msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set() and i < 20000:
            self.p.produce(TOPIC, value=b"r%d" % i, partition=0, on_delivery=self._report)
            self.p.poll(0.01)
            i += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.p.flush(WAIT_S) == 0


def owner_and_epoch(z, broker_id: int) -> tuple[int, int]:
    st = z.client.exists(zkdata.broker_path(broker_id))
    return st.ephemeralOwner, st.czxid


@pytest.mark.parametrize("role", ["follower", "leader", "controller"])
def test_a_brokers_expired_session_is_a_bounce(brokers, zk, connect, role):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS)))
    z = zk()
    registered(z, {1, 2, 3})
    cid = settled_controller(z, procs)
    lead, follow = [b for b in (1, 2, 3) if b != cid]
    create_assigned(procs[cid].bootstrap, [lead, follow, cid])
    first = eventually(lambda: state(z), lambda s: s.leader == lead and len(s.isr) == 3,
                       timeout=WAIT_S)
    assert first.leader == lead and len(first.isr) == 3
    target = {"follower": follow, "leader": lead, "controller": cid}[role]
    owner, epoch = owner_and_epoch(z, target)
    ctl_epoch = controller_epoch(z)

    producer = BackgroundProducer(bootstrap(procs))
    try:
        eventually(lambda: len(producer.acked), lambda n: n >= 100, timeout=WAIT_S)
        expire_session(connect, owner)
        # registered again in a new session, under a new broker epoch
        again = eventually(lambda: registered(z, {1, 2, 3})[target],
                           lambda r: r[2] != owner, timeout=WAIT_S)
        assert again[2] != owner and again[1] > epoch, (again, owner, epoch)
        assert f"registering broker {target} again" in procs[target].read_log()
        new_cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
        if new_cid != target:  # (a controller re-elected itself has no bounce to see)
            # the controller took it out of the ISR (a bounce: it may have lost what it
            # had), then it caught up and the leader took it back in
            bumped = eventually(lambda: state(z), lambda s: s.leader_epoch >
                                first.leader_epoch and len(s.isr) == 3, timeout=WAIT_S)
            assert bumped.leader_epoch > first.leader_epoch and len(bumped.isr) == 3, bumped
        # leadership comes back to the preferred replica (it left when the leader bounced)
        home = eventually(lambda: state(z), lambda s: s.leader == lead and len(s.isr) == 3,
                          timeout=WAIT_S)
        assert home.leader == lead and len(home.isr) == 3, home
        if role == "leader":
            assert home.leader_epoch >= first.leader_epoch + 2  # moved away and back
        if role == "controller":
            assert controller_epoch(z) > ctl_epoch  # a new election (whoever won it)
        else:
            assert (new_cid, controller_epoch(z)) == (cid, ctl_epoch)
        n = len(producer.acked)
        eventually(lambda: len(producer.acked), lambda k: k >= n + 100, timeout=WAIT_S)
    finally:
        producer.stop()
    if role == "controller":  # the controller, whoever it is now, fails a leader over
        procs[lead].kill()
        moved = eventually(lambda: state(z), lambda s: s.leader not in (lead, -1),
                           timeout=WAIT_S)
        assert moved.leader in (follow, cid), moved
    live = {k: b for k, b in procs.items() if b.proc is not None}
    got = consume_all(bootstrap(live), len(producer.acked), timeout=WAIT_S)
    assert set(producer.acked) <= set(got)  # no acknowledged record lost
    assert len(got) == len(set(got))  # nor duplicated
    assert not producer.failed, producer.failed[:3]
    # its own controller component follows its new session: with every other broker gone it
    # is elected (its watch on /controller was set again)
    for b, proc in procs.items():
        if b != target:
            proc.kill()
    assert eventually(lambda: controller_id(z), lambda c: c == target,
                      timeout=WAIT_S) == target
