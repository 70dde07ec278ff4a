# KIP-932 share groups through confluent-kafka 2.16's ShareConsumer (librdkafka 2.16, which
# sends ShareGroupHeartbeat v1, ShareFetch v1 and ShareAcknowledge v1). Kafka 3.8 serves no
# share groups, so these run against kafkalite only (COMPATIBILITY.md); expectations follow
# KIP-932 / Kafka 4.1. Each test has its own broker: the lock duration and delivery limit
# are broker settings, and share-partition state must start clean.
from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest

from kafkalite.testing import BrokerProcess
from tests.integration.test_groups_helpers import RawClient

GROUP_RESOURCE, SET = 32, 0
ACCEPT, RELEASE, REJECT = (ck.AcknowledgeType.ACCEPT, ck.AcknowledgeType.RELEASE,
                           ck.AcknowledgeType.REJECT)


@pytest.fixture
def share_broker():
    yield from running_broker({"group.share.delivery.count.limit": "3"})


def running_broker(settings: dict[str, str]):
    """A broker of its own with short share locks and heartbeats, and `settings`."""
    b = BrokerProcess(settings={"group.share.record.lock.duration.ms": "2000",
                                "group.share.min.record.lock.duration.ms": "1000",
                                "group.share.heartbeat.interval.ms": "500", **settings}).start()
    yield b
    b.stop()
    b.cleanup()


def earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (GROUP resource, Kafka 4.x), so that
    records produced before the consumers join are delivered."""
    c = RawClient(bootstrap)
    m = c.schema(44, 1)
    (r,) = c.call(44, 1, validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configs=(m.AlterableConfig(
            name="share.auto.offset.reset", config_operation=SET, value="earliest"),)),)
    ).responses
    assert int(r.error_code) == 0, r.error_message


def produce(bootstrap: str, topic: str, n: int, per_batch: int = 1000) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"%d" % i)
        if (i + 1) % per_batch == 0:
            assert p.flush(15) == 0
    assert p.flush(15) == 0


def consumer(bootstrap: str, group: str, topic: str, explicit: bool = False):
    c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit" if explicit else "implicit",
                          "max.poll.records": 10})
    c.subscribe([topic])
    return c


def poll_until(consumers, want, timeout: float, on_message=None) -> list:
    """Poll each consumer in turn until `want(seen)` or `timeout`; returns (index, message)."""
    seen: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not want(seen):
        for i, c in enumerate(consumers):
            for m in c.poll(0.2):
                if m.error() is None:
                    seen.append((i, m))
                    if on_message is not None:
                        on_message(i, c, m)
    return seen


def make_topic(bootstrap: str, partitions: int = 1) -> tuple[str, str]:
    from confluent_kafka.admin import AdminClient, NewTopic
    topic, group = f"sq-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    earliest(bootstrap, group)
    return topic, group


def explicit_consumer_on(broker, records: int):
    """A new topic with `records` records and an explicit-mode consumer of a new group."""
    topic, group = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, records)
    return topic, group, consumer(broker.bootstrap, group, topic, explicit=True)


def test_four_consumers_share_one_partition(share_broker):
    bs = share_broker.bootstrap
    topic, group = make_topic(bs)
    consumers = [consumer(bs, group, topic) for _ in range(4)]
    try:
        assert poll_until(consumers, lambda s: False, 2) == []  # all join first
        produce(bs, topic, 200, per_batch=5)  # 40 batches: a batch is acquired whole
        seen = poll_until(consumers, lambda s: len(s) >= 200, 60)
        offsets = [m.offset() for _, m in seen]
        assert sorted(offsets) == list(range(200)), "each record once when all accept"
        assert len({i for i, _ in seen}) >= 3, "the partition's records are shared"
    finally:
        for c in consumers:
            c.close()


def test_reject_archives_release_redelivers(share_broker):
    _topic, _group, c = explicit_consumer_on(share_broker, 6)
    deliveries: dict[int, list[int]] = {}

    def ack(_i, cons, m):
        deliveries.setdefault(m.offset(), []).append(m.delivery_count())
        first = len(deliveries[m.offset()]) == 1
        kind = (REJECT if m.offset() % 3 == 0 else RELEASE) if first else ACCEPT
        cons.acknowledge(m, kind)

    try:
        poll_until([c], lambda s: len(s) >= 10, 30, ack)
        c.commit_sync(10)
        # Rejected records (0, 3) never come back; released ones come back once more.
        assert len(deliveries[0]) == 1 and len(deliveries[3]) == 1
        for off in (1, 2, 4, 5):
            assert deliveries[off] == [1, 2], deliveries
        extra = poll_until([c], lambda s: bool(s), 3)
        assert extra == []
    finally:
        c.close()


def test_unacknowledged_record_redelivered_after_lock_expiry(share_broker):
    topic, group, first = explicit_consumer_on(share_broker, 1)
    got = poll_until([first], lambda s: bool(s), 30)
    assert [m.offset() for _, m in got] == [0]
    # `first` neither acknowledges nor closes: its lock (2 s) must run out on the broker.
    second = consumer(share_broker.bootstrap, group, topic, explicit=True)
    t0 = time.monotonic()
    try:
        again = poll_until([second], lambda s: bool(s), 30,
                           lambda _i, cons, m: cons.acknowledge(m, ACCEPT))
        assert [m.offset() for _, m in again] == [0]
        assert time.monotonic() - t0 >= 1.0, "redelivered only once the lock expired"
        assert again[0][1].delivery_count() == 2
    finally:
        second.close()
        first.close()


def test_delivery_count_limit_archives(share_broker):
    _topic, _group, c = explicit_consumer_on(share_broker, 1)
    try:
        # Release every delivery: with group.share.delivery.count.limit=3 the third
        # release archives the record, so exactly three deliveries happen.
        got = poll_until([c], lambda s: len(s) >= 4, 12,
                         lambda _i, cons, m: cons.acknowledge(m, RELEASE))
        assert [(m.offset(), m.delivery_count()) for _, m in got] == [(0, 1), (0, 2), (0, 3)]
    finally:
        c.close()


def test_state_survives_sigkill(share_broker):
    topic, group, c = explicit_consumer_on(share_broker, 10)
    try:
        got = poll_until([c], lambda s: len(s) >= 10, 30,
                         lambda _i, cons, m: cons.acknowledge(
                             m, ACCEPT if m.offset() < 5 else RELEASE))
        assert sorted(m.offset() for _, m in got) == list(range(10))
        # Offsets 5-9 were released, so redeliveries may come: take them without acking.
        c.commit_sync(10)
    finally:
        share_broker.kill()
        c.close()
    share_broker.restart(hard=True)
    again = consumer(share_broker.bootstrap, group, topic, explicit=True)
    try:
        seen = poll_until([again], lambda s: len(s) >= 5, 30,
                          lambda _i, cons, m: cons.acknowledge(m, ACCEPT))
        seen += poll_until([again], lambda s: False, 2,
                           lambda _i, cons, m: cons.acknowledge(m, ACCEPT))
        # Nothing acknowledged comes back, nothing unacknowledged is lost.
        assert sorted(m.offset() for _, m in seen) == [5, 6, 7, 8, 9]
    finally:
        again.close()
