# The bounded failover loop of test_cluster_failover.py against the reference: three Apache
# Kafka 3.8.0 brokers in ZooKeeper mode (tests/helpers/zookeeper.py, their own chroot of the
# session ZooKeeper, 256 MB heap each), with the same producer, consumer group and checks:
# what holds for kafkalite's cluster must hold for Kafka's (issue 17, "How it is proven").
from __future__ import annotations

import os

from tests.cluster.test_membership import Zk
from tests.helpers import zookeeper as zkh
from tests.reliability.test_cluster_failover import GROUP_SETTINGS, IDS, run_cycles

# a killed broker's registration goes with its session: short, so that a cycle takes seconds
KAFKA_SETTINGS = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "4000",
                  "auto.leader.rebalance.enable": "false", **GROUP_SETTINGS}


def test_kafka_cluster_survives_leader_kills(zookeeper, tmp_path):
    with zkh.kafka_on_zookeeper(zookeeper, IDS, KAFKA_SETTINGS) as (connect, procs):
        z = Zk(connect)
        try:
            run_cycles(procs, z, tmp_path, cycles=int(os.environ.get("KAFKALITE_CYCLES", 2)),
                       log_root=lambda b: os.path.join(b.data_dir, "logs"))
        finally:
            z.close()
