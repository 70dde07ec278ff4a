# The hosted-replicas scenario of test_hosted_replicas.py against the reference: the same
# steps on three Apache Kafka 3.8.0 brokers in ZooKeeper mode (a chroot of their own on the
# session ZooKeeper) and on three kafkalite brokers. Each broker's DescribeLogDirs (the
# partitions and their sizes) before, after and back from the reassignment, the data left on
# broker 1, the answers to requests for a partition broker 1 does not host (never, or no
# longer), and the records read back must be the same.
from __future__ import annotations

import contextlib

import pytest

from tests.cluster.test_hosted_replicas import scenario
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_zk_admin_apis import controller_id
from tests.helpers import zookeeper as zkh
from tests.helpers.real_kafka import eventually

SETTINGS = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "20000",
            "auto.leader.rebalance.enable": "false"}


@pytest.fixture
def kafka_cluster(zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (3, 1, 2), SETTINGS) as (connect, made), \
            contextlib.closing(Zk(connect)) as z:
        yield made, z


def test_hosted_replicas_as_kafka(brokers, zk, kafka_cluster):
    kafka_procs, kafka_z = kafka_cluster
    expected = scenario(kafka_procs, kafka_z)
    procs = dict(zip((3,), brokers(3, **SETTINGS)))
    z = zk()
    registered(z, {3})
    eventually(lambda: controller_id(z), lambda c: c == 3, timeout=WAIT_S)
    procs.update(zip((1, 2), brokers(1, 2, **SETTINGS)))
    registered(z, {1, 2, 3})
    got = scenario(procs, z)
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not diffs, "\n".join(f"Kafka:     {e!r}\nkafkalite: {g!r}" for e, g in diffs)
    assert len(got) == len(expected)
