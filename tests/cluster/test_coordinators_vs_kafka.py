# First use of the coordinators and of auto-creation in a ZooKeeper cluster, Apache Kafka 3.8.0
# in ZooKeeper mode against kafkalite, one broker each on a chroot of its own of the session
# ZooKeeper: the same raw requests must get the same answers, step by step, and leave the same
# topics in ZooKeeper. An internal topic whose replication factor exceeds the live brokers is
# never written and its coordinator stays COORDINATOR_NOT_AVAILABLE; one that fits is written
# by the first FindCoordinator, answered COORDINATOR_NOT_AVAILABLE until its leader is elected;
# Metadata auto-creates an ordinary topic with num.partitions / default.replication.factor.
from __future__ import annotations


import pytest
from kafka.protocol import metadata

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (GROUP, OFFSETS, TRANSACTION, TXN, find, found,
                                               lone_kafkalite)
from tests.cluster.test_membership import WAIT_S, Zk
from tests.cluster.test_zk_admin_apis import assignment
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

SETTINGS = {"offsets.topic.replication.factor": "2",  # more than the one live broker
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "3",
            "transaction.state.log.segment.bytes": "2097152",
            "num.partitions": "2", "default.replication.factor": "1"}


def metadata_for(bootstrap: str, topic: str) -> tuple[int, int]:
    """Metadata v9 for one topic, auto-creation allowed: (error code, partitions)."""
    R = metadata.MetadataRequest[9]
    with open_socket(bootstrap) as s:
        (t,) = call(s, R(topics=[R.MetadataRequestTopic(name=topic)],
                         allow_auto_topic_creation=True,
                         include_cluster_authorized_operations=False,
                         include_topic_authorized_operations=False)).topics
    return t.error_code, len(t.partitions)


def scenario(connect: str, bootstrap: str, node_id: int) -> list:
    z = Zk(connect)
    try:
        out: list = [find(bootstrap, "g", GROUP)[0] for _ in range(3)]
        out.append(assignment(z, OFFSETS))  # None: not written
        out.append(find(bootstrap, "tx", TRANSACTION)[0])
        out.append(found(bootstrap, "tx", TRANSACTION) == node_id)
        a = assignment(z, TXN)
        out.append(sorted((p, r) for p, r in a.partitions.items()))
        configs = zkdata.decode_topic_config(z.client.get(zkdata.topic_config_path(TXN))[0])
        out.append({k: configs.get(k) for k in ("cleanup.policy", "segment.bytes")})
        first = metadata_for(bootstrap, "auto")
        out.append(first[0])
        out.append(eventually(lambda: metadata_for(bootstrap, "auto"),
                              lambda r: r[0] == ErrorCode.none, timeout=WAIT_S))
        out.append(sorted((p, r) for p, r in assignment(z, "auto").partitions.items()))
        return out
    finally:
        z.close()


@pytest.fixture
def kafka_broker(zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (1,), SETTINGS) as (connect, brokers):
        yield connect, brokers[1].bootstrap


@pytest.fixture
def kafkalite_broker(zookeeper):
    with lone_kafkalite(zookeeper, SETTINGS) as (connect, bootstrap):
        yield connect, bootstrap


def test_first_use_answers_match_kafka_in_zookeeper_mode(kafka_broker, kafkalite_broker):
    expected = scenario(*kafka_broker, 1)
    assert expected[0] == ErrorCode.coordinator_not_available  # the reference as read
    assert scenario(*kafkalite_broker, 1) == expected
