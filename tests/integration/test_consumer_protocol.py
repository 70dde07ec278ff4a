# KIP-848 consumer groups end to end: confluent-kafka 2.16.1 consumers with
# group.protocol=consumer against kafkalite and against the real Kafka (3.8 serves the protocol
# as early access with group.coordinator.rebalance.protocols=classic,consumer, but only
# ConsumerGroupHeartbeat v0, which librdkafka 2.16 refuses: the Kafka runs skip there with
# that reason and run against a Kafka 4.x anchor). Both brokers get the same lowered
# consumer-group session timeout so that a killed consumer's partitions move within seconds.
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402

from kafkalite.testing import BrokerProcess  # noqa: E402
from tests.helpers.real_kafka import private_kafka  # noqa: E402

SESSION_MS = 6000
GROUP_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
}
KAFKA_SETTINGS = {"group.coordinator.rebalance.protocols": "classic,consumer",
                  **GROUP_SETTINGS}


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def broker(request, tmp_path_factory):
    if request.param == "kafkalite":
        bp = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("cg") / "data"),
                           settings=GROUP_SETTINGS)
        bp.start()
        try:
            yield bp.bootstrap
        finally:
            bp.cleanup()
    else:
        with private_kafka(KAFKA_SETTINGS) as bootstrap:
            if heartbeat_max_version(bootstrap) < 1:
                # librdkafka 2.16 needs ConsumerGroupHeartbeat v1 (Kafka 4.0+, KIP-1082) and
                # reports "ConsumerGroupHeartbeatRequest not supported by broker" for 3.8's
                # v0: the reference cannot serve these clients (COMPATIBILITY.md).
                pytest.skip("Kafka 3.8 serves ConsumerGroupHeartbeat v0 only; librdkafka "
                            "2.16's group.protocol=consumer needs v1 (Kafka 4.0+)")
            yield bootstrap


def heartbeat_max_version(bootstrap: str) -> int:
    """The highest ConsumerGroupHeartbeat version the broker advertises (-1: none)."""
    from kafka.protocol.metadata import ApiVersionsRequest

    from tests.helpers.kbatch import call, connect
    with connect(bootstrap) as s:
        keys = call(s, ApiVersionsRequest[0]()).api_keys
    return max((k.max_version for k in keys if k.api_key == 68), default=-1)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Kafka's metadata cache catches up asynchronously
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {name} not ready")


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> set[str]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(count):
        v = f"{topic}-{i}"
        values.add(v)
        p.produce(topic, v.encode(), partition=i % partitions)
    assert p.flush(30) == 0
    return values


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **extra})


class Tracker:
    """A consumer that records each assignment change (the on_assign/on_revoke callbacks)."""

    def __init__(self, c: Consumer, topics: list[str]):
        self.c = c
        self.owned: set[tuple[str, int]] = set()
        self.revoked: set[tuple[str, int]] = set()
        self.seen: list[str] = []
        c.subscribe(topics, on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, c, parts):
        self.owned |= {(p.topic, p.partition) for p in parts}

    def _revoke(self, c, parts):
        gone = {(p.topic, p.partition) for p in parts}
        self.owned -= gone
        self.revoked |= gone

    def poll(self, commit: bool = True) -> None:
        msg = self.c.poll(0.1)
        if msg is None or msg.error():
            return
        self.seen.append(msg.value().decode())
        if commit:  # commit-after-process
            commit_sync(self.c, msg)


def commit_sync(c: Consumer, msg, timeout: float = 10.0) -> None:
    """Commits past `msg`, retrying STALE_MEMBER_EPOCH as an application must: Kafka 4.x
    checks a consumer-protocol member's commit against its current epoch exactly
    (ConsumerGroup.validateOffsetCommit), so a commit sent while a heartbeat bumps the epoch
    fails, and librdkafka 2.16 does not retry a manual commit on that error (it only
    expedites the heartbeat that brings the new epoch). Retrying before the next poll() keeps
    the partition: its revocation is acknowledged only after poll() runs on_revoke."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.commit(message=msg, asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or \
                    time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def poll_until(trackers: list[Tracker], done, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t in trackers:
            t.poll()
        if done():
            return
    raise AssertionError("timed out: " + repr([sorted(t.owned) for t in trackers]))


def all_partitions(topic: str, n: int) -> set[tuple[str, int]]:
    return {(topic, i) for i in range(n)}


def test_three_consumers_share_six_partitions_and_one_leaves(broker):
    topic, group = f"cg-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, 6)
    values = produce(broker, topic, 120, 6)
    ts = [Tracker(consumer(broker, group), [topic]) for _ in range(3)]
    try:
        def balanced():
            owned = [t.owned for t in ts]
            return (sum(len(o) for o in owned) == 6 and set().union(*owned) ==
                    all_partitions(topic, 6) and all(len(o) == 2 for o in owned))
        poll_until(ts, balanced)
        kept = [set(t.owned) for t in ts[:2]]
        for t in ts[:2]:
            t.revoked.clear()
        ts[2].c.close()
        poll_until(ts[:2], lambda: ts[0].owned | ts[1].owned == all_partitions(topic, 6)
                   and not ts[0].owned & ts[1].owned)
        for t, before in zip(ts[:2], kept):
            assert before <= t.owned, "a member lost a partition it kept"
            assert not t.revoked & before, "a kept partition was revoked"
        poll_until(ts[:2], lambda: {v for t in ts for v in t.seen} >= values)
        seen = [v for t in ts for v in t.seen]
        assert set(seen) == values
    finally:
        for t in ts[:2]:
            t.c.close()


def _killable(bootstrap: str, group: str, topic: str, ready) -> None:
    c = consumer(bootstrap, group)
    c.subscribe([topic], on_assign=lambda c, parts: ready.set() if parts else None)
    while True:  # until SIGKILLed
        c.poll(0.1)


def test_killed_consumer_partitions_move_after_session_timeout(broker):
    topic, group = f"cgk-{uuid.uuid4().hex[:8]}", f"gk-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, 4)
    values = produce(broker, topic, 80, 4)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_killable, args=(broker, group, topic, ready), daemon=True)
    proc.start()
    t = None
    try:
        assert ready.wait(60), "the child consumer got no partitions"
        t = Tracker(consumer(broker, group), [topic])
        poll_until([t], lambda: len(t.owned) == 2, timeout=60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        poll_until([t], lambda: t.owned == all_partitions(topic, 4), timeout=60)
        poll_until([t], lambda: set(t.seen) >= values, timeout=60)
    finally:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
        if t is not None:
            t.c.close()


def test_every_record_once_with_commit_after_process(broker):
    """A consumer processes half, commits each record, closes; the next one of the same
    group starts from the committed offsets: nothing is lost and nothing comes twice."""
    topic, group = f"cgo-{uuid.uuid4().hex[:8]}", f"go-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, 3)
    values = produce(broker, topic, 60, 3)
    first = Tracker(consumer(broker, group), [topic])
    poll_until([first], lambda: len(first.seen) >= 30)
    first.c.close()
    second = Tracker(consumer(broker, group), [topic])
    try:
        poll_until([second], lambda: set(first.seen) | set(second.seen) >= values)
        assert sorted(first.seen + second.seen) == sorted(values)
    finally:
        second.c.close()


def test_new_partitions_are_assigned_without_rejoin(broker):
    topic, group = f"cgp-{uuid.uuid4().hex[:8]}", f"gp-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, 2)
    t = Tracker(consumer(broker, group), [topic])
    try:
        poll_until([t], lambda: t.owned == all_partitions(topic, 2))
        admin = AdminClient({"bootstrap.servers": broker})
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        poll_until([t], lambda: t.owned == all_partitions(topic, 4))
        assert not t.revoked
    finally:
        t.c.close()


def test_regex_subscription_picks_up_a_new_topic(broker):
    prefix = f"cgr{uuid.uuid4().hex[:6]}"
    create_topic(broker, f"{prefix}-a", 1)
    t = Tracker(consumer(broker, f"gr-{prefix}", **{"topic.metadata.refresh.interval.ms": 1000}),
                [f"^{prefix}-.*"])
    try:
        poll_until([t], lambda: t.owned == {(f"{prefix}-a", 0)})
        create_topic(broker, f"{prefix}-b", 2)
        poll_until([t], lambda: t.owned == {(f"{prefix}-a", 0), (f"{prefix}-b", 0),
                                            (f"{prefix}-b", 1)})
        assert not t.revoked
    finally:
        t.c.close()


def test_admin_lists_describes_and_deletes_a_consumer_group(broker):
    from confluent_kafka import ConsumerGroupType
    topic, group = f"cga-{uuid.uuid4().hex[:8]}", f"ga-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, 2)
    produce(broker, topic, 4, 2)
    t = Tracker(consumer(broker, group), [topic])
    admin = AdminClient({"bootstrap.servers": broker})
    try:
        poll_until([t], lambda: len(t.seen) == 4)
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert group in {g.group_id for g in listed.valid}
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
        assert group not in {g.group_id for g in classic.valid}
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert {(tp.topic, tp.partition) for m in desc.members
                for tp in m.assignment.topic_partitions} == all_partitions(topic, 2)
        with pytest.raises(Exception) as e:  # a group with members cannot be deleted
            admin.delete_consumer_groups([group])[group].result(30)
        assert "NON_EMPTY_GROUP" in str(e.value) or "not empty" in str(e.value).lower()
    finally:
        t.c.close()
    deadline = time.monotonic() + 30
    while True:  # the leave is asynchronous for the admin's view
        try:
            admin.delete_consumer_groups([group])[group].result(30)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    listed = admin.list_consumer_groups().result(30)
    assert group not in {g.group_id for g in listed.valid}
