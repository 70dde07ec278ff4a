# The hosted-replicas scenario of test_hosted_replicas.py against the reference: the same
# steps on three Apache Kafka 3.8.0 brokers in ZooKeeper mode (a chroot of their own on the
# session ZooKeeper; test_reassignment_vs_kafka.py's cluster) and on three kafkalite brokers.
# Each broker's DescribeLogDirs (the partitions and their sizes) before, after and back from
# the reassignment, the data left on broker 1, the answers to requests for a partition
# broker 1 does not host (never, or no longer), and the records read back must be the same.
from __future__ import annotations

from tests.cluster.test_hosted_replicas import scenario
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_reassignment_vs_kafka import SETTINGS, kafka_cluster  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id
from tests.helpers.real_kafka import eventually


def test_hosted_replicas_as_kafka(brokers, zk, kafka_cluster):
    expected = scenario(*kafka_cluster)
    # as on Kafka's side, broker 3 starts first and becomes the controller
    (first,) = brokers(3, **SETTINGS)
    z = zk()
    registered(z, {3})
    eventually(lambda: controller_id(z), lambda c: c == 3, timeout=WAIT_S)
    procs = {3: first, **dict(zip((1, 2), brokers(1, 2, **SETTINGS)))}
    registered(z, {1, 2, 3})
    got = scenario(procs, z)
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not diffs, "\n".join(f"Kafka:     {e!r}\nkafkalite: {g!r}" for e, g in diffs)
    assert len(got) == len(expected)
