# At-least-once delivery through rebalances: 30,000 records are produced while confluent-kafka
# consumers (separate processes) join, leave cleanly and are killed with SIGKILL. Each worker
# commits synchronously after processing. Every record must be processed, and no record may
# be processed after a commit covering it succeeded: the only re-deliveries allowed are of
# records whose processing was never committed (the killed worker's last batch, or a commit
# refused because a rebalance got there first).
from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict

from confluent_kafka import Producer

from .test_groups_helpers import Worker, wait_for, wait_split

RECORDS = 30_000
PARTITIONS = 6


def _produce(bootstrap: str, topic: str, counts: list[int], errors: list) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            counts[msg.partition()] += 1

    chunk = 500
    for start in range(0, RECORDS, chunk):
        for i in range(start, start + chunk):
            p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
        p.poll(0)
        time.sleep(0.2)  # spread production over the membership changes
    assert p.flush(60) == 0


def test_no_record_lost_none_reprocessed_after_commit(kafka_broker, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=PARTITIONS)
    group = f"delivery-{uuid.uuid4().hex[:8]}"
    counts = [0] * PARTITIONS
    errors: list = []
    producer = threading.Thread(target=_produce, args=(kafka_broker, topic, counts, errors))
    producer.start()

    def worker(name: str) -> Worker:
        return Worker("confluent", kafka_broker, topic, group, tmp_path / f"{name}.jsonl",
                      name=name)

    w1, w2 = worker("w1"), worker("w2")
    all_workers = [w1, w2]
    try:
        wait_split([w1, w2], PARTITIONS, 60, "two members")
        w3 = worker("w3")
        all_workers.append(w3)
        wait_split([w1, w2, w3], PARTITIONS, 60, "a third member to join")
        w1.stop()
        wait_split([w2, w3], PARTITIONS, 60, "w1's partitions after it closed")
        w4 = worker("w4")
        all_workers.append(w4)
        wait_split([w2, w3, w4], PARTITIONS, 60, "a fourth member to join")
        w2.kill()
        wait_split([w3, w4], PARTITIONS, 60, "w2's partitions after SIGKILL")
        producer.join(120)
        assert not producer.is_alive() and not errors, errors
        assert sum(counts) == RECORDS

        def committed() -> dict[int, int]:
            best: dict[int, int] = defaultdict(int)
            for w in all_workers:
                for e in w.events():
                    if e["ev"] == "commit":
                        best[e["p"]] = max(best[e["p"]], e["next"])
            return best

        wait_for(lambda: all(committed()[p] == counts[p] for p in range(PARTITIONS)), 90,
                 lambda: f"commits to reach the end offsets {counts}: {dict(committed())}")
    finally:
        producer.join(120)
        for w in all_workers:
            w.stop()

    processed: list[tuple[float, str, int, int]] = []
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for w in all_workers:
        for e in w.events():
            if e["ev"] == "recs":
                processed += [(e["t"], w.name, e["p"], o) for o in e["offs"]]
            elif e["ev"] == "commit":
                commits[e["p"]].append((e["t"], e["next"]))

    for p in range(PARTITIONS):
        seen = {o for _, _, q, o in processed if q == p}
        missing = set(range(counts[p])) - seen
        assert not missing, f"partition {p}: {len(missing)} records never processed"

    violations = []
    for t, name, p, o in processed:
        covered = max((n for tc, n in commits[p] if tc < t), default=0)
        if o < covered:
            violations.append((name, p, o, covered))
    assert not violations, f"processed again after a commit covered them: {violations[:10]}"
    dupes = len(processed) - RECORDS
    print(f"{len(processed)} records processed, {dupes} re-deliveries of uncommitted records")
