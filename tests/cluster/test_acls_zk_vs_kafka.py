# ACLs in ZooKeeper (issue 17) against the reference: two Apache Kafka 3.8.0 brokers in
# ZooKeeper mode (kafka.security.authorizer.AclAuthorizer) and two kafkalite brokers, each
# pair on a chroot of its own of the session ZooKeeper, run test_acls_zk.scenario: the same
# CreateAcls / DeleteAcls through the first broker must write the same znodes, byte for byte
# (the resource znodes and the change notifications, the notifications of one request
# compared as a set), and be enforced and listed the same by the other broker; a binding
# no notification announced is deleted the same by a filter naming its resource. Then
# kafkalite brokers started on the chroot Kafka's brokers wrote enforce Kafka's ACLs.
from __future__ import annotations

import pytest

from tests.cluster.test_acls_zk import (ALLOWED, DENY_PREFIX, DENY_SECRET, REFUSED, SETTINGS,
                                        scenario, topic_error, unseen_scenario)
from tests.cluster.test_membership import (brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.helpers import zookeeper as zkh
from tests.integration.test_acls import create, describe


@pytest.fixture
def kafka_cluster(zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (1, 2), settings=SETTINGS) as (connect_, procs):
        yield connect_, procs


def test_acl_znodes_and_enforcement_match_kafka(kafka_cluster, brokers, zk):
    kafka_connect, kafka_procs = kafka_cluster
    theirs = {i: b.bootstrap for i, b in kafka_procs.items()}
    expected = scenario(kafka_connect, theirs) + unseen_scenario(kafka_connect, theirs)
    ours = dict(zip((1, 2), brokers(1, 2, **SETTINGS)))
    registered(zk(), (1, 2))
    connect_ = ours[1].settings["zookeeper.connect"]
    mine = {i: b.bootstrap for i, b in ours.items()}
    got = scenario(connect_, mine) + unseen_scenario(connect_, mine)
    assert got == expected
    assert expected[4] == [REFUSED, REFUSED]  # the scenario showed something: enforcement


def test_kafkalite_enforces_the_acls_kafka_wrote(kafka_cluster, brokers):
    kafka_connect, kafka_procs = kafka_cluster
    assert [c for c, _ in create(kafka_procs[1].bootstrap, DENY_SECRET, DENY_PREFIX)] == [0, 0]
    for b in kafka_procs.values():
        b.stop()
    (ours,) = brokers(3, zk_connect=kafka_connect, **SETTINGS)
    assert [topic_error(ours.bootstrap, t) for t in ("secret", "pre-x", "other")] == \
        [REFUSED, REFUSED, ALLOWED]
    assert describe(ours.bootstrap)[2] == sorted([DENY_SECRET, DENY_PREFIX])
