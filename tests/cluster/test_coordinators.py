# The group coordinator in a ZooKeeper cluster (issue 17, design step 8): spawned kafkalite
# brokers on the test's chroot, the controller enabled. The first FindCoordinator writes
# __consumer_offsets to ZooKeeper (replication factor, partitions, configs as Kafka's); every
# broker then names the same coordinator, the leader of the group's partition as ZooKeeper
# says it; only that broker answers the group's requests, the others NOT_COORDINATOR; a
# group of real consumers (confluent-kafka, kafka-python) spread over three brokers consumes
# and commits through it.
from __future__ import annotations

import uuid

import pytest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (OFFSETS, cluster, find, found, heartbeat,
                                               leader_of, offset_fetch)
from tests.cluster.test_membership import WAIT_S, brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import assignment, create
from tests.helpers.kclients import produce
from tests.helpers.real_kafka import eventually

SMALL = {"offsets.topic.num.partitions": "6"}


def test_the_first_lookup_writes_the_offsets_topic_and_every_broker_names_its_leader(
        brokers, zk):
    procs, z, _ = cluster(brokers, zk, **SMALL, **{
        "offsets.topic.replication.factor": "3", "offsets.topic.segment.bytes": "1048576"})
    group = f"g-{uuid.uuid4().hex[:8]}"
    # Kafka in ZooKeeper mode: not available until the controller has elected the leaders
    first, _ = find(procs[2].bootstrap, group)
    assert first == ErrorCode.coordinator_not_available
    a = eventually(lambda: assignment(z, OFFSETS), lambda a: a is not None, timeout=WAIT_S)
    assert sorted(a.partitions) == list(range(6))
    for replicas in a.partitions.values():  # Kafka's placement: rf distinct live brokers
        assert len(replicas) == 3 and set(replicas) == {1, 2, 3}
    assert len({r[0] for r in a.partitions.values()}) == 3  # leaders spread over all three
    configs = zkdata.decode_topic_config(z.client.get(zkdata.topic_config_path(OFFSETS))[0])
    assert configs["cleanup.policy"] == "compact" and configs["segment.bytes"] == "1048576"
    coordinators = {i: found(b.bootstrap, group) for i, b in procs.items()}
    leader = eventually(lambda: leader_of(z, OFFSETS, group), lambda x: x is not None,
                        timeout=WAIT_S)
    assert set(coordinators.values()) == {leader[0]}


def test_fewer_live_brokers_than_the_replication_factor_is_not_available_until_they_join(
        brokers, zk):
    procs, z, _ = cluster(brokers, zk, (1, 2), **SMALL, **{
        "offsets.topic.replication.factor": "3"})
    for _ in range(3):
        assert find(procs[1].bootstrap, "g")[0] == ErrorCode.coordinator_not_available
    assert assignment(z, OFFSETS) is None  # nothing written: Kafka refuses the creation
    procs[3] = brokers(3, **SMALL, **{"offsets.topic.replication.factor": "3"})[0]
    registered(z, {1, 2, 3})
    node = found(procs[1].bootstrap, "g")
    assert node == leader_of(z, OFFSETS, "g")[0]
    assert {len(r) for r in assignment(z, OFFSETS).partitions.values()} == {3}


def test_only_the_coordinator_answers_a_group_the_others_not_coordinator(brokers, zk):
    procs, z, _ = cluster(brokers, zk, **SMALL)
    group = "raw-group"
    coordinator = found(procs[1].bootstrap, group)
    others = [b for i, b in procs.items() if i != coordinator]
    for b in others:
        assert offset_fetch(b.bootstrap, group, "t", [0])[0] == ErrorCode.not_coordinator
        assert heartbeat(b.bootstrap, group) == ErrorCode.not_coordinator
    err, offsets = eventually(lambda: offset_fetch(procs[coordinator].bootstrap, group, "t", [0]),
                              lambda r: r[0] == ErrorCode.none, timeout=WAIT_S)
    assert (err, offsets) == (ErrorCode.none, {0: -1})
    assert heartbeat(procs[coordinator].bootstrap, group) == ErrorCode.unknown_member_id


class Member:
    """One consumer of a group through `client` (confluent-kafka or kafka-python)."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str):
        self.client = client
        if client == "confluent":
            import confluent_kafka as ck
            self.c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        else:
            from kafka import KafkaConsumer
            self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                   enable_auto_commit=False, auto_offset_reset="earliest",
                                   session_timeout_ms=6000, heartbeat_interval_ms=500)
        self.c.subscribe([topic])
        self.seen: list[tuple[int, bytes]] = []

    def poll(self) -> int:
        """One short poll; how many partitions the member is assigned."""
        if self.client == "confluent":
            m = self.c.poll(0.2)
            if m is not None and m.error() is None:
                self.seen.append((m.partition(), m.value()))
        else:
            for tp, rows in self.c.poll(timeout_ms=200).items():
                self.seen.extend((tp.partition, r.value) for r in rows)
        return len(self.c.assignment())

    def commit(self) -> None:
        if self.client == "confluent":
            self.c.commit(asynchronous=False)
        else:
            self.c.commit()


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_group_of_two_consumers_on_three_brokers_consumes_and_commits(brokers, zk, client):
    from kafka import KafkaConsumer, TopicPartition
    procs, z, cid = cluster(brokers, zk, **SMALL)
    assert create(procs[cid].bootstrap, "orders", partitions=6, rf=1).error_code == 0
    bootstrap = ",".join(b.bootstrap for b in procs.values())
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(client, bootstrap, group, "orders") for _ in range(2)]
    try:
        def poll_all() -> list[int]:
            return [m.poll() for m in members]
        assert eventually(poll_all, lambda n: n == [3, 3], timeout=WAIT_S) == [3, 3]
        records = [(p, None, f"{p}-{i}".encode(), None, None) for p in range(6) for i in range(5)]
        produce("confluent", bootstrap, "orders", records)
        eventually(lambda: poll_all() and sum(len(m.seen) for m in members), lambda n: n >= 30,
                   timeout=WAIT_S)
        assert all(m.seen for m in members)
        assert sorted(members[0].seen + members[1].seen) == sorted(
            (p, v) for p, _, v, _, _ in records)
        for m in members:
            m.commit()
    finally:
        for m in members:
            m.c.close()
    check = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                          enable_auto_commit=False)
    try:
        committed = {p: check.committed(TopicPartition("orders", p)) for p in range(6)}
    finally:
        check.close()
    assert committed == {p: 5 for p in range(6)}
    coordinator = found(procs[1].bootstrap, group)
    assert offset_fetch(procs[coordinator].bootstrap, group, "orders", list(range(6))) == (
        ErrorCode.none, {p: 5 for p in range(6)})
