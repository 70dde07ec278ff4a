# Online upgrade of a classic group to a KIP-848 consumer group (Kafka 4.x,
# group.consumer.migration.policy=bidirectional): three confluent-kafka 2.16.1 consumers of a
# classic group (group.protocol=classic, eager range assignor) are rolled one by one to
# group.protocol=consumer while records keep coming. The first ConsumerGroupHeartbeat
# converts the group; the classic members left keep consuming through JoinGroup/SyncGroup/
# Heartbeat answered by the consumer group, rejoining when told REBALANCE_IN_PROGRESS. With
# commit-after-process every record is consumed exactly once throughout. (No reference run:
# librdkafka 2.16's consumer protocol needs ConsumerGroupHeartbeat v1, Kafka 4.0+.)
from __future__ import annotations

import uuid
from collections import Counter

from kafkalite.testing import BrokerProcess
from tests.integration.test_consumer_protocol import (GROUP_SETTINGS, Tracker, all_partitions,
                                                      consumer, create_topic, poll_until,
                                                      produce)
from tests.integration.test_consumer_protocol_restart import produce_named

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 6000,
           "heartbeat.interval.ms": 500}


def settled(active: list[Tracker], topic: str) -> bool:
    owned = [t.owned for t in active]
    return sum(len(o) for o in owned) == 6 and set().union(*owned) == all_partitions(topic, 6)


def roll(tmp_path, steps, after_step) -> tuple[BrokerProcess, str, Counter]:
    """Three classic consumers of a 6-partition topic, then each step closes consumer i and
    starts it again with `settings`, with 60 records more, polled until every partition is
    owned and every record seen; after_step(n, bp) checks the broker between steps. Returns
    the (stopped) broker's log, the group and how often each record was consumed."""
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=GROUP_SETTINGS).start()
    topic, group = f"mg-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    everyone: list[Tracker] = []
    try:
        create_topic(bp.bootstrap, topic, 6)
        want = produce(bp.bootstrap, topic, 60, 6)
        active = [Tracker(consumer(bp.bootstrap, group, **CLASSIC), [topic]) for _ in range(3)]
        everyone += active
        seen = lambda: Counter(v for t in everyone for v in t.seen)  # noqa: E731
        poll_until(active, lambda: settled(active, topic) and set(seen()) == want)
        for n, (i, settings) in enumerate(steps):
            active[i].c.close()
            active[i] = Tracker(consumer(bp.bootstrap, group, **settings), [topic])
            everyone.append(active[i])
            want |= produce_named(bp.bootstrap, topic, [f"{topic}-s{n}-{k}" for k in range(60)])
            poll_until(active, lambda: settled(active, topic) and set(seen()) == want)
            after_step(n, bp, group)
        counts = seen()
        assert set(counts) == want
        return bp.read_log(), group, counts
    finally:
        for t in everyone:
            t.c.close()
        bp.cleanup()


def test_classic_group_rolled_to_the_consumer_protocol(tmp_path):
    def check(n: int, bp: BrokerProcess, group: str) -> None:
        if n == 0:
            assert "upgraded to a consumer group" in bp.read_log()
    # A classic LeaveGroup each time (to the consumer group from the 2nd on).
    log, _, counts = roll(tmp_path, [(0, {}), (1, {}), (2, {})], check)
    assert log.count("classic member") == 2  # the 2nd and 3rd left the consumer group
    assert [v for v, n in counts.items() if n > 1] == []


def test_mixed_group_rolled_back_to_classic_downgrades(tmp_path):
    """Downgrade (Kafka 4.x convertToClassicGroup): a group of 1 classic and 2 consumer-
    protocol members (upgraded online) rolls its consumer-protocol members back to
    group.protocol=classic; when the last of them leaves the group turns classic again, with
    a rebalance, and goes on as a classic group. Every record once throughout."""
    def check(n: int, bp: BrokerProcess, group: str) -> None:
        assert ("downgraded to a classic group" in bp.read_log()) == (n == 3), n
        if n == 3:
            assert group_type(bp.bootstrap, group) == "classic"
    steps = [(0, {}), (1, {}), (0, CLASSIC), (1, CLASSIC)]  # up, up, back, back
    log, _, counts = roll(tmp_path, steps, check)
    assert "upgraded to a consumer group" in log
    assert [v for v, k in counts.items() if k > 1] == []


def group_type(bootstrap: str, group: str) -> str:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for g in admin.list_consumer_groups(request_timeout=10).result().valid:
        if g.group_id == group:
            return g.type.name.lower()
    return "none"
