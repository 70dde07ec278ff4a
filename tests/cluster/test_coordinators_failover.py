# The group coordinator moving with the leadership of its __consumer_offsets partition (issue
# 17, design step 8): spawned kafkalite brokers on the test's chroot, the controller enabled.
# Replication is not there yet, so a new leader has only its own log: the offsets topic has
# one replica (offsets.topic.replication.factor=1) where data must survive, and the move test
# looks only at the groups each broker holds.
from __future__ import annotations

import uuid

from kafkalite.cluster import zkdata
from kafkalite.coordinator.offsets_log import partition_for
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (OFFSETS, cluster, find, found, heartbeat,
                                               offset_fetch)
from tests.cluster.test_membership import WAIT_S, brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import create
from tests.helpers.real_kafka import eventually

SMALL = {"offsets.topic.num.partitions": "3"}


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A simple commit (no generation) by kafka-python, synchronous."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                  for (t, p), o in offsets.items()})
    finally:
        c.close()


def group_on_cluster(brokers, zk, offsets_rf: int, partitions: int, rf: int):
    """Three brokers, topic "t", a fresh group id and its coordinator: (brokers by id, kazoo
    session, group, coordinator id, every bootstrap address)."""
    procs, z, cid = cluster(brokers, zk, **SMALL, **{
        "offsets.topic.replication.factor": str(offsets_rf)})
    assert create(procs[cid].bootstrap, "t", partitions=partitions, rf=rf).error_code == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    return (procs, z, group, found(procs[1].bootstrap, group),
            ",".join(b.bootstrap for b in procs.values()))


def test_the_coordinator_killed_is_not_available_then_its_offsets_come_back(brokers, zk):
    procs, z, group, coordinator, everyone = group_on_cluster(brokers, zk, 1, 3, 3)
    wanted = {("t", 0): 11, ("t", 1): 22, ("t", 2): 33}
    commit(everyone, group, wanted)
    assert offset_fetch(procs[coordinator].bootstrap, group, "t", [0, 1, 2]) == (
        ErrorCode.none, {0: 11, 1: 22, 2: 33})
    procs[coordinator].kill()
    other = procs[next(i for i in procs if i != coordinator)]
    # one replica, unclean election off: the partition has no leader, so no coordinator
    assert eventually(lambda: find(other.bootstrap, group)[0],
                      lambda e: e == ErrorCode.coordinator_not_available,
                      timeout=WAIT_S) == ErrorCode.coordinator_not_available
    registered(z, set(procs) - {coordinator})  # its old registration has expired
    procs[coordinator].start()
    assert found(other.bootstrap, group) == coordinator
    err, got = eventually(lambda: offset_fetch(procs[coordinator].bootstrap, group, "t",
                                               [0, 1, 2]),
                          lambda r: r[0] == ErrorCode.none, timeout=WAIT_S)
    assert (err, got) == (ErrorCode.none, {0: 11, 1: 22, 2: 33})


def move_leader(z, topic: str, partition: int, to: int) -> None:
    """Make `to` the partition's leader with the next leader epoch, a conditional write on
    the state znode as the controller's."""
    path = zkdata.partition_state_path(topic, partition)
    data, st = z.client.get(path)
    old = zkdata.PartitionState.decode(data)
    assert to in old.isr
    z.client.set(path, zkdata.PartitionState(to, old.leader_epoch + 1, old.isr,
                                             old.controller_epoch).encode(), st.version)


def test_a_leadership_move_unloads_the_groups_of_the_old_leader(brokers, zk):
    import confluent_kafka as ck
    procs, z, group, old, everyone = group_on_cluster(brokers, zk, 3, 2, 1)
    c = ck.Consumer({"bootstrap.servers": everyone, "group.id": group,
                     "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 200})
    try:
        c.subscribe(["t"])
        assert eventually(lambda: c.poll(0.2) or len(c.assignment()), lambda n: n == 2,
                          timeout=WAIT_S) == 2
        assert heartbeat(procs[old].bootstrap, group) == ErrorCode.unknown_member_id
        new = next(i for i in procs if i != old)
        move_leader(z, OFFSETS, partition_for(group, 3), new)
        # every broker follows ZooKeeper: the old leader drops the group, the new one leads
        assert eventually(lambda: heartbeat(procs[old].bootstrap, group),
                          lambda e: e == ErrorCode.not_coordinator,
                          timeout=WAIT_S) == ErrorCode.not_coordinator
        assert offset_fetch(procs[old].bootstrap, group, "t", [0])[0] == \
            ErrorCode.not_coordinator
        assert "Unloaded __consumer_offsets-" in procs[old].read_log()
        for b in procs.values():
            assert eventually(lambda: find(b.bootstrap, group),
                              lambda r: r == (ErrorCode.none, new), timeout=WAIT_S) == (
                ErrorCode.none, new)
        # the consumer finds the new coordinator and joins the group there again
        assert eventually(lambda: c.poll(0.2) or heartbeat(procs[new].bootstrap, group),
                          lambda e: e == ErrorCode.unknown_member_id and
                          len(c.assignment()) == 2, timeout=WAIT_S) == \
            ErrorCode.unknown_member_id
    finally:
        c.close()
