# Network partitions against the reference: the scenarios of test_network_partition.py, with
# the same assertions, on three Apache Kafka 3.8.0 brokers in ZooKeeper mode, each JVM in a
# network namespace of its own (`ip netns exec` as the command prefix) on its own address,
# with the test's own ZooKeeper on the bridge. Each JVM takes a 256 MB heap; every wait is
# bounded (WAIT_S), and the brokers are killed, not shut down, at the end.
from __future__ import annotations

import os
from typing import Iterator

import pytest

from tests.cluster.test_membership import Zk, registered
from tests.cluster.test_network_partition import (NAMES, SETTINGS, TOPIC, Cluster,  # noqa: F401
                                                  controller_isolated,
                                                  follower_cut_from_leader, leader_isolated,
                                                  net, zk_on_bridge)
from tests.helpers import zookeeper as zkh


@pytest.fixture
def kafka(net, zk_on_bridge, tmp_path) -> Iterator[Cluster]:
    places = {i: (net.address(n), net.prefix(n)) for i, n in NAMES.items()}
    with zkh.kafka_on_zookeeper(zk_on_bridge, tuple(NAMES), SETTINGS, places=places) as (
            connect, procs):
        z = Zk(connect)
        try:
            registered(z, set(procs))
            yield Cluster(procs, z, net, lambda b: os.path.join(b.data_dir, "logs",
                                                               f"{TOPIC}-0"))
        finally:
            z.close()
            net.heal()
            for i, b in procs.items():
                (tmp_path / f"kafka-{i}.log").write_text(b.read_log()[-200_000:])
                b.kill()  # its data goes next: a controlled shutdown would only cost time


def test_an_isolated_leader_acknowledges_nothing_and_rejoins_truncated(kafka, tmp_path):
    leader_isolated(kafka, tmp_path)


def test_a_follower_cut_from_the_leader_leaves_the_isr_and_rejoins(kafka):
    follower_cut_from_leader(kafka)


def test_an_isolated_controller_is_replaced_and_fenced(kafka):
    controller_isolated(kafka)
