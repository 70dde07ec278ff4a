# The ZooKeeper restart of test_zk_restart.py against the reference: three Apache Kafka 3.8.0
# brokers in ZooKeeper mode on the test's own ZooKeeper server, the same session timeout, the
# same scenario and assertions (restart_scenario): ZooKeeper down for several session
# timeouts while the leader serves produce and fetch and a follower stops, then every broker
# registered, the shrink written, the follower back, a SIGKILLed leader failed over, no
# acknowledged record lost.
from __future__ import annotations

from tests.cluster.test_membership import SESSION_MS
from tests.cluster.test_zk_restart import LAG_MS, restart_scenario, server  # noqa: F401
from tests.helpers.zookeeper import kafka_on_zookeeper


def test_kafka_rides_out_a_zookeeper_restart_as_kafkalite_does(server):
    settings = {"zookeeper.session.timeout.ms": str(SESSION_MS),
                "replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.wait.max.ms": "200",
                "auto.leader.rebalance.enable": "false",
                "offsets.topic.replication.factor": "3"}
    with kafka_on_zookeeper(server.connect, (1, 2, 3), settings) as (connect, procs):
        # bounds of a minute: Kafka's shrink goes through its controller (AlterPartition),
        # which may be the follower stopped, so it waits for that broker's session to expire
        # and a controller election, in JVMs sharing two loaded cores
        restart_scenario(procs, connect, server, down_s=3 * SESSION_MS / 1000, shrink=True,
                         wait_s=60.0)
