# Committed offsets are durable: they live in __consumer_offsets and are replayed at start.
# Offsets and their metadata strings (byte for byte) survive a clean restart and a SIGKILL
# of the broker, consumers resume from them, a deleted topic takes its offsets along, and
# the offsets topic is compacted so that replay does not grow with the number of commits.
from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTP

from .test_groups_helpers import Worker, wait_for, wait_split

METADATA = ["héllo ✓ \U0001f600 \\x00 \"quoted\"", "", "x" * 4000]


def _admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="durability",
                            request_timeout_ms=30000)


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = _admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _fetch(bootstrap: str, group: str) -> dict:
    """The group's committed offsets through OffsetFetch (kafka-python's admin client),
    retried while the restarted coordinator is still loading."""
    def attempt():
        admin = _admin(bootstrap)
        try:
            got = admin.list_group_offsets({group: None})[group]
        except Exception:  # COORDINATOR_LOAD_IN_PROGRESS, connection refused while starting
            return None
        finally:
            admin.close()
        return {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in got.items()}
    return wait_for(attempt, 60, f"OffsetFetch of {group}", 0.5)  # type: ignore[return-value]


def test_offsets_and_metadata_survive_clean_and_hard_restarts(broker_process):
    bp = broker_process
    topic, group = f"durable-{uuid.uuid4().hex[:8]}", "durable-group"
    _create(bp.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": bp.bootstrap})
    for i in range(90):
        p.produce(topic, value=b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0

    # A kafka-python group member consumes everything and commits with metadata strings.
    k = KafkaConsumer(topic, bootstrap_servers=bp.bootstrap, group_id=group,
                      enable_auto_commit=False, auto_offset_reset="earliest")
    seen = 0
    deadline = time.monotonic() + 60  # bounded by time: poll() returns early around rebalances
    while seen < 90 and time.monotonic() < deadline:
        seen += sum(len(rs) for rs in k.poll(timeout_ms=200).values())
    assert seen == 90
    k.commit({KTP(topic, i): OffsetAndMetadata(5 * (i + 1), METADATA[i], -1)
              for i in range(3)})
    k.close()

    expected = {(topic, i): (5 * (i + 1), METADATA[i]) for i in range(3)}
    assert _fetch(bp.bootstrap, group) == expected

    bp.restart()
    assert _fetch(bp.bootstrap, group) == expected
    bp.restart(hard=True)
    assert _fetch(bp.bootstrap, group) == expected

    # A member of the same group resumes exactly at the committed offsets.
    c = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for m in c.consume(100, 0.2):
            if not m.error():
                first.setdefault(m.partition(), m.offset())
        if len(first) == 3:
            break
    c.close()
    # (confluent-kafka's committed() reads metadata as a NUL-terminated C string, so it is
    # checked through kafka-python's OffsetFetch above.)
    assert first == {i: 5 * (i + 1) for i in range(3)}


def test_deleted_topic_takes_its_offsets(broker_process):
    bp = broker_process
    keep, drop = f"keep-{uuid.uuid4().hex[:6]}", f"drop-{uuid.uuid4().hex[:6]}"
    group = f"compact-{uuid.uuid4().hex[:6]}"
    _create(bp.bootstrap, keep, 2)
    _create(bp.bootstrap, drop, 2)
    # A simple consumer (no group membership, generation -1) commits to an Empty group.
    c = KafkaConsumer(bootstrap_servers=bp.bootstrap, group_id=group,
                      enable_auto_commit=False)
    for i in range(1, 1501):
        c.commit({KTP(keep, 0): OffsetAndMetadata(i, f"m{i}", -1)})
    c.commit({KTP(keep, 1): OffsetAndMetadata(7, "seven", -1),
              KTP(drop, 0): OffsetAndMetadata(3, "three", -1)})
    c.close()
    assert _fetch(bp.bootstrap, group) == {(keep, 0): (1500, "m1500"),
                                           (keep, 1): (7, "seven"), (drop, 0): (3, "three")}

    admin = _admin(bp.bootstrap)
    try:
        admin.delete_topics([drop])
    finally:
        admin.close()
    after = {(keep, 0): (1500, "m1500"), (keep, 1): (7, "seven")}
    wait_for(lambda: _fetch(bp.bootstrap, group) == after, 30, "the deleted topic's offsets")

    # (The log cleaner's compaction of the offsets topic: test_compaction_internal.py.)
    bp.restart()
    assert _fetch(bp.bootstrap, group) == after
    bp.restart(hard=True)
    assert _fetch(bp.bootstrap, group) == after


def test_live_members_rejoin_after_a_broker_crash_and_lose_nothing(broker_process, tmp_path):
    """Membership does not survive a restart, committed offsets do: running consumers get
    UNKNOWN_MEMBER_ID, rejoin, and carry on from what they committed."""
    bp = broker_process
    topic, group = f"crash-{uuid.uuid4().hex[:6]}", f"crash-{uuid.uuid4().hex[:6]}"
    _create(bp.bootstrap, topic, 4)
    workers = [Worker("confluent", bp.bootstrap, topic, group, tmp_path / f"c{i}.jsonl")
               for i in range(2)]

    def produce(start: int, n: int) -> None:
        p = Producer({"bootstrap.servers": bp.bootstrap})
        for i in range(start, start + n):
            p.produce(topic, value=b"%d" % i, partition=i % 4)
        assert p.flush(30) == 0

    def committed() -> dict[int, int]:
        best: dict[int, int] = {}
        for w in workers:
            for e in w.events():
                if e["ev"] == "commit":
                    best[e["p"]] = max(best.get(e["p"], 0), e["next"])
        return best

    try:
        wait_split(workers, 4, 60, "two members")
        produce(0, 200)
        wait_for(lambda: committed() == {p: 50 for p in range(4)}, 60,
                 lambda: f"the first 200 records to be committed: {committed()}")
        assigns = [sum(1 for e in w.events() if e["ev"] == "assign") for w in workers]
        bp.restart(hard=True)
        produce(200, 200)
        wait_for(lambda: committed() == {p: 100 for p in range(4)}, 90,
                 lambda: f"the next 200 records to be committed: {committed()}")
        wait_split(workers, 4, 60, "the group to re-form")
        # Both members went through a new rebalance (their old member ids were unknown).
        assert all(sum(1 for e in w.events() if e["ev"] == "assign") > n
                   for w, n in zip(workers, assigns))
    finally:
        for w in workers:
            w.stop()
    processed = {(e["p"], o) for w in workers for e in w.events() if e["ev"] == "recs"
                 for o in e["offs"]}
    assert processed == {(p, o) for p in range(4) for o in range(100)}
