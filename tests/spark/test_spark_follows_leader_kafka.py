# The Spark follows-leader scenario (test_spark_follows_leader.py) against the reference: three
# Apache Kafka 3.8.0 brokers in ZooKeeper mode on their own chroot of the session ZooKeeper,
# the same RF=3, min.insync.replicas=2 topic, the same SIGKILL of its leader and the same
# checks: the running query ends with every value exactly once, a batch read returns the same,
# the killed broker rejoins the ISR (issue 17, "the guarantees match").
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from kafkalite.wire.errors import ErrorCode  # noqa: E402
from tests.cluster.test_membership import WAIT_S, Zk  # noqa: E402
from tests.cluster.test_replication import TOPIC, state, wait_isr  # noqa: E402
from tests.cluster.test_zk_admin_apis import controller_id, create  # noqa: E402
from tests.helpers import zookeeper as zkh  # noqa: E402
from tests.helpers.kbatch import connect as open_socket  # noqa: E402
from tests.helpers.kbatch import fetch_raw  # noqa: E402
from tests.helpers.real_kafka import eventually  # noqa: E402
from tests.spark.test_spark_follows_leader import TIMEOUTS, follow_killed_leader  # noqa: E402

IDS = (1, 2, 3)
# as kafkalite's side (tests/cluster/test_replication.py `cluster`), but a 4 s session (as
# tests/reliability/test_cluster_failover_kafka.py): Kafka's JVMs pause longer under load
SETTINGS = {"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
            "zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false",
            "offsets.topic.replication.factor": "3"}


@pytest.fixture
def kafka_cluster(zookeeper):
    """Kafka brokers 1-3 and TOPIC (RF=3, min.insync.replicas=2) with its whole ISR and a
    leader that serves it: ({id: ZkModeKafka}, kazoo session)."""
    with zkh.kafka_on_zookeeper(zookeeper, IDS, SETTINGS) as (connect, procs):
        z = Zk(connect)
        try:
            # CreateTopics goes to the controller (another ZooKeeper-mode broker answers
            # NOT_CONTROLLER)
            row = eventually(
                lambda: create(procs[controller_id(z) or IDS[0]].bootstrap, TOPIC, partitions=1,
                               rf=3, configs={"min.insync.replicas": "2"}),
                lambda r: r.error_code in (0, ErrorCode.topic_already_exists), timeout=WAIT_S)
            assert row.error_code in (0, ErrorCode.topic_already_exists), row
            assert wait_isr(z, lambda s: s == set(IDS)) == set(IDS)
            with open_socket(procs[state(z).leader].bootstrap) as s:
                assert eventually(lambda: fetch_raw(s, TOPIC, 0, 0).error_code,
                                  lambda c: c == 0, timeout=WAIT_S) == 0
            yield procs, z
        finally:
            z.close()


@pytest.mark.timeout(420)
@TIMEOUTS
def test_a_running_query_and_the_batch_writer_follow_a_killed_kafka_leader(
        kafka_spark, kafka_cluster, tmp_path, read_options):
    procs, z = kafka_cluster
    follow_killed_leader(kafka_spark, procs, z, tmp_path, read_options, "kafka")
