# Two protocols on top of the classic group protocol, with confluent-kafka consumers in
# separate processes: cooperative-sticky rebalances incrementally (members keep the
# partitions they are not asked to give up), and static membership (KIP-345) lets a
# restarted member take its assignment back without a rebalance while a duplicate instance
# fences the old one.
from __future__ import annotations

import time
import uuid

from .test_groups_helpers import HEARTBEAT_MS, Worker, wait_for, wait_split


def _events(w: Worker, kinds: set[str], after: int = 0) -> list[dict]:
    return [e for e in w.events()[after:] if e["ev"] in kinds]


def test_cooperative_sticky_moves_only_what_it_must(kafka_broker, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=6)
    group = f"coop-{uuid.uuid4().hex[:8]}"

    def worker(name: str) -> Worker:
        return Worker("confluent", kafka_broker, topic, group, tmp_path / f"{name}.jsonl",
                      name=name, strategy="cooperative-sticky")

    w1, w2 = worker("c1"), worker("c2")
    workers = [w1, w2]
    try:
        wait_split(workers, 6, 60, "two cooperative members")
        before = {w.name: set(w.assignment()) for w in workers}
        marks = {w.name: len(w.events()) for w in workers}
        w3 = worker("c3")
        workers.append(w3)
        wait_split(workers, 6, 60, "a third cooperative member")
        for w in (w1, w2):
            after = set(w.assignment())
            assert after <= before[w.name], (w.name, before[w.name], after)
            assert len(after) == 2
            revoked = [set(e["parts"]) for e in _events(w, {"revoke", "lost"}, marks[w.name])]
            # Incremental: only the partitions that moved were revoked, never the kept ones.
            assert revoked and all(not (r & after) for r in revoked), (w.name, revoked, after)
        assert sorted(e["parts"] for e in _events(w3, {"assign"}) if e["parts"]) \
            == [sorted(w3.assignment())]
    finally:
        for w in workers:
            w.stop()


def test_static_member_restarts_without_rebalance_and_duplicates_are_fenced(
        kafka_broker, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=6)
    group = f"static-{uuid.uuid4().hex[:8]}"

    def worker(name: str, instance: str) -> Worker:
        return Worker("confluent", kafka_broker, topic, group, tmp_path / f"{name}.jsonl",
                      name=name, instance=instance, session_ms=20000)

    workers = [worker(f"s{i}", f"instance-{i}") for i in range(3)]
    s0, s1, s2 = workers
    try:
        wait_split(workers, 6, 60, "three static members")
        owned = s1.assignment()
        marks = {w.name: len(w.events()) for w in workers}
        s1.kill()
        s1b = worker("s1-restarted", "instance-1")
        workers.append(s1b)
        wait_for(lambda: s1b.assignment() == owned, 60,
                 lambda: f"the restarted static member to get {owned} back: {s1b.assignment()}")
        time.sleep(3 * HEARTBEAT_MS / 1000)  # a rebalance would reach the others by now
        for w in (s0, s2):
            moved = _events(w, {"assign", "revoke", "lost"}, marks[w.name])
            assert not moved, f"{w.name} went through a rebalance: {moved}"
            assert w.alive

        # A second process with instance-2's id takes over; the first one is fenced.
        owned2 = s2.assignment()
        s2b = worker("s2-duplicate", "instance-2")
        workers.append(s2b)
        wait_for(lambda: s2b.assignment() == owned2, 60,
                 lambda: f"the duplicate to take over {owned2}: {s2b.assignment()}")
        wait_for(lambda: any("FENCED" in e.get("msg", "").upper()
                             for e in _events(s2, {"error"})), 30,
                 lambda: f"the old instance to be fenced: {_events(s2, {'error'})}")
    finally:
        for w in workers:
            w.stop()
