# Share-partition state kept in __share_group_state (Kafka's ShareSnapshot/ShareUpdate
# records), through confluent-kafka's ShareConsumer and a SIGKILLed broker: many
# acknowledgements across two hard restarts (with a snapshot every 5 updates, so replay goes
# through snapshots, updates and pruning), and the topic shown as Kafka 4.x shows its
# internal topics. kafkalite only: Kafka 3.8 serves no share groups.
from __future__ import annotations

import os

import pytest
from kafka import KafkaAdminClient

from kafkalite.testing import BrokerProcess
from tests.integration.test_share_groups import ACCEPT, consumer, make_topic, poll_until, produce

RECORDS = 300


@pytest.fixture
def broker():
    b = BrokerProcess(settings={"group.share.record.lock.duration.ms": "2000",
                                "group.share.min.record.lock.duration.ms": "1000",
                                "group.share.heartbeat.interval.ms": "500",
                                "share.coordinator.state.topic.num.partitions": "3",
                                "share.coordinator.snapshot.update.records.per.snapshot": "5"
                                }).start()
    yield b
    b.stop()
    b.cleanup()


def accept_some(bootstrap: str, topic: str, group: str, want: int, timeout: float) -> list[int]:
    """Accept what one consumer gets until `want` records (or `timeout`); commit; offsets."""
    c = consumer(bootstrap, group, topic, explicit=True)
    try:
        seen = poll_until([c], lambda s: len(s) >= want, timeout,
                          lambda _i, cons, m: cons.acknowledge(m, ACCEPT))
        c.commit_sync(10)
        return [m.offset() for _, m in seen]
    finally:
        c.close()


def test_acknowledgements_survive_two_sigkills(broker):
    topic, group = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, RECORDS, per_batch=10)
    accepted: list[int] = []
    for _ in range(2):
        accepted += accept_some(broker.bootstrap, topic, group, 100, 30)
        broker.kill()
        broker.restart(hard=True)
    accepted += accept_some(broker.bootstrap, topic, group, RECORDS - len(set(accepted)), 60)
    accepted += accept_some(broker.bootstrap, topic, group, 1, 3)  # nothing more comes
    assert len(accepted) == len(set(accepted)), "an acknowledged record came back"
    assert sorted(accepted) == list(range(RECORDS)), "an unacknowledged record was lost"
    assert not os.path.exists(os.path.join(broker.data_dir, ".kafkalite", "share-state.json"))


def test_state_topic_is_internal(broker):
    topic, group = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, 3)
    assert sorted(accept_some(broker.bootstrap, topic, group, 3, 30)) == [0, 1, 2]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (described,) = admin.describe_topics(["__share_group_state"])
        listed = admin.list_topics()
    finally:
        admin.close()
    assert described["error_code"] == 0 and described["is_internal"] is True
    assert len(described["partitions"]) == 3
    assert "__share_group_state" in listed
