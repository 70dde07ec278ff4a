# The cluster's broker properties are Kafka's: DescribeConfigs of a BROKER resource answers for
# zookeeper.connect, zookeeper.session.timeout.ms, zookeeper.connection.timeout.ms and
# broker.rack what Apache Kafka 3.8 answers (names, defaults, types, read-only, synonyms), on a
# kafkalite without zookeeper.connect and on the real Kafka.
from __future__ import annotations

from tests.helpers.kconfigs import BROKER, describe

KEYS = ["zookeeper.connect", "zookeeper.session.timeout.ms",
        "zookeeper.connection.timeout.ms", "broker.rack"]


def test_the_cluster_properties_are_described_as_kafka_describes_them(kafka_broker,
                                                                      real_kafka):
    ours = describe(kafka_broker, BROKER, "1", KEYS)
    kafkas = describe(real_kafka, BROKER, "1", KEYS)
    assert ours[0] == kafkas[0] == 0
    assert set(kafkas[2]) == set(KEYS)
    assert ours[2] == kafkas[2]
