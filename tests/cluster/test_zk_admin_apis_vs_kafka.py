# The admin answers of a 2-broker cluster on ZooKeeper, Apache Kafka 3.8.0 in ZooKeeper mode
# against kafkalite, each on a chroot of its own of the session ZooKeeper: the same raw
# requests to the controller and to the other broker must get the same error codes and
# messages (NOT_CONTROLLER from the other broker; the replication factor refused with
# ZooKeeper-era Kafka's message; duplicates; partition growth; deletion).
from __future__ import annotations


import pytest
from kafka.protocol.admin import CreatePartitionsRequest

from tests.cluster.test_membership import CONNECT_MS, SESSION_MS, WAIT_S, Zk
from tests.cluster.test_zk_admin_apis import assignment, controller_id, create, delete, grow
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually, free_port_pair
from kafkalite.testing import BrokerProcess


def grow_by_one_with(bootstrap: str, name: str, count: int, replicas: list[int]):
    P = CreatePartitionsRequest.CreatePartitionsTopic
    with open_socket(bootstrap) as s:
        (row,) = call(s, CreatePartitionsRequest[1](topics=[P(
            name=name, count=count, assignments=[P.CreatePartitionsAssignment(
                broker_ids=replicas)])], timeout_ms=15000, validate_only=False)).results
    return row


def scenario(connect: str, bootstraps: dict[int, str]) -> list:
    """The answers (code, message) and the assignment's shape, step by step."""
    z = Zk(connect)
    try:
        cid = eventually(lambda: controller_id(z), lambda c: c in bootstraps, timeout=WAIT_S)
        assert cid in bootstraps
        ctrl = bootstraps[cid]
        other = bootstraps[next(b for b in bootstraps if b != cid)]
        out = []

        def row(r):
            out.append((r.error_code, getattr(r, "error_message", None)))
        row(create(other, "t", partitions=2, rf=2))
        row(create(ctrl, "t", partitions=2, rf=3))
        created = create(ctrl, "t", partitions=2, rf=2)
        row(created)
        out.append((created.num_partitions, created.replication_factor))
        a = assignment(z, "t")
        out.append(sorted((p, len(set(r))) for p, r in a.partitions.items()))
        row(create(ctrl, "t", partitions=2, rf=2))
        row(create(ctrl, "t.x", partitions=1, rf=1))
        row(create(ctrl, "t_x", partitions=1, rf=1))
        row(grow(other, "t", 3))
        row(grow(ctrl, "t", 2))
        row(grow(ctrl, "t", 1))
        row(grow_by_one_with(ctrl, "t", 3, [7]))
        row(grow(ctrl, "t", 3))
        out.append(sorted(assignment(z, "t").partitions))
        out.append(delete(other, "t").error_code)
        out.append(delete(ctrl, "t").error_code)
        # Kafka answers once its brokers' metadata lost the topic; the znode goes after
        out.append(eventually(lambda: assignment(z, "t"), lambda a: a is None,
                              timeout=WAIT_S) is None)
        return out
    finally:
        z.close()


@pytest.fixture
def kafka_cluster(zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (1, 2)) as (connect, brokers):
        yield connect, {i: b.bootstrap for i, b in brokers.items()}


@pytest.fixture
def kafkalite_cluster(zookeeper):
    connect = zkh.chroot_connect(zookeeper)
    brokers = {i: BrokerProcess(port=free_port_pair(), settings={
        "node.id": str(i), "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "zookeeper.connection.timeout.ms": str(CONNECT_MS)}) for i in (1, 2)}
    try:
        for b in brokers.values():
            b.start()
        z = Zk(connect)
        try:
            eventually(lambda: len(z.brokers()), lambda n: n == 2, timeout=WAIT_S)
        finally:
            z.close()
        yield connect, {i: b.bootstrap for i, b in brokers.items()}
    finally:
        for b in brokers.values():
            b.kill()
            b.cleanup()


def test_admin_answers_match_kafka_in_zookeeper_mode(kafka_cluster, kafkalite_cluster):
    expected = scenario(*kafka_cluster)
    assert scenario(*kafkalite_cluster) == expected
