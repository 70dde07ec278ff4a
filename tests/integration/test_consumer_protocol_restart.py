# KIP-848 groups across a broker restart, as Kafka 4.x keeps them: confluent-kafka 2.16.1
# consumers (group.protocol=consumer) stay up while kafkalite stops and starts again (cleanly,
# and after a SIGKILL). The group is replayed from __consumer_offsets, so the members go on
# heartbeating with the same member ids and epochs: no partition is revoked, and with
# commit-after-process every record is consumed exactly once. (No reference run: Kafka 3.8
# serves ConsumerGroupHeartbeat v0 only, which librdkafka 2.16 does not use.)
from __future__ import annotations

import multiprocessing
import os
import random
import signal
import socket
import time
import uuid
from collections import Counter

import pytest

from kafkalite.testing import BrokerProcess
from tests.integration.test_consumer_protocol import (GROUP_SETTINGS, SESSION_MS, Tracker,
                                                      _killable, all_partitions, consumer,
                                                      create_topic, poll_until, produce)


@pytest.mark.parametrize("hard", [False, True], ids=["clean", "sigkill"])
def test_group_of_three_survives_a_restart_without_revoking(tmp_path, hard):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), port=low_port(),
                       settings=GROUP_SETTINGS).start()
    topic, group = f"rs-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    trackers: list[Tracker] = []
    try:
        create_topic(bp.bootstrap, topic, 6)
        values = produce(bp.bootstrap, topic, 60, 6)
        trackers = [Tracker(consumer(bp.bootstrap, group), [topic]) for _ in range(3)]
        seen = lambda: Counter(v for t in trackers for v in t.seen)  # noqa: E731

        def settled():
            return set(seen()) == values and all(len(t.owned) == 2 for t in trackers)
        poll_until(trackers, settled)
        for t in trackers:
            t.revoked.clear()
        owned = [set(t.owned) for t in trackers]
        members = [t.c.memberid() for t in trackers]

        bp.restart(hard=hard)
        # Keep the consumers polling (heartbeating) through the restart.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for t in trackers:
                t.poll()
        want = values | produce_named(bp.bootstrap, topic,
                                      [f"{topic}-late-{i}" for i in range(60)])
        poll_until(trackers, lambda: set(seen()) == want, timeout=60)
        # Settle a little longer: no late revocation, no redelivery.
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            for t in trackers:
                t.poll()

        counts = seen()
        assert set(counts) == want
        assert [v for v, n in counts.items() if n > 1] == []
        assert [t.revoked for t in trackers] == [set(), set(), set()]
        assert [set(t.owned) for t in trackers] == owned
        assert [t.c.memberid() for t in trackers] == members
        assert "consumer groups (3 members)" in bp.read_log()
    finally:
        for t in trackers:
            t.c.close()
        bp.cleanup()


def low_port() -> int:
    """A free port below the ephemeral range (the restart takes the same port again, which
    a client's ephemeral source port could otherwise hold)."""
    for _ in range(50):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32000")


def produce_named(bootstrap: str, topic: str, values: list[str]) -> set[str]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % 6)
    assert p.flush(30) == 0
    return set(values)


def test_members_that_never_return_are_fenced_after_a_restart(tmp_path):
    """Consumers in child processes are SIGKILLed while the broker is down. First a group
    whose only member is killed, with no consumer anywhere left to heartbeat: it becomes
    Empty after the session timeout, because the load armed the replayed members' timers.
    Then a group of three where one is killed: its partitions go to the other two."""
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), port=low_port(),
                       settings=GROUP_SETTINGS).start()
    topic, group_a, group_b = (f"nr-{uuid.uuid4().hex[:8]}", f"ga-{uuid.uuid4().hex[:8]}",
                               f"gb-{uuid.uuid4().hex[:8]}")
    ctx = multiprocessing.get_context("spawn")
    procs: list = []
    trackers: list[Tracker] = []

    def start_child(group: str) -> None:
        ready = ctx.Event()
        proc = ctx.Process(target=_killable, args=(bp.bootstrap, group, topic, ready),
                           daemon=True)
        proc.start()
        procs.append(proc)
        assert ready.wait(60), "a child consumer got no partitions"

    def restart_killing_children() -> None:
        bp.stop()
        for proc in procs:
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(10)
        bp.start()

    try:
        create_topic(bp.bootstrap, topic, 6)
        produce(bp.bootstrap, topic, 60, 6)
        start_child(group_b)
        assert group_states(bp.bootstrap)[group_b] == "Stable"
        restart_killing_children()
        deadline = time.monotonic() + SESSION_MS / 1000 + 30
        while group_states(bp.bootstrap).get(group_b) != "Empty":
            assert time.monotonic() < deadline, group_states(bp.bootstrap)
            time.sleep(0.5)

        start_child(group_a)
        trackers = [Tracker(consumer(bp.bootstrap, group_a), [topic]) for _ in range(2)]
        poll_until(trackers, lambda: all(len(t.owned) == 2 for t in trackers))
        restart_killing_children()
        poll_until(trackers, lambda: set().union(*(t.owned for t in trackers))
                   == all_partitions(topic, 6), timeout=SESSION_MS / 1000 + 30)
    finally:
        for proc in procs:
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGKILL)
        for t in trackers:
            t.c.close()
        bp.cleanup()


def group_states(bootstrap: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    return {g.group_id: g.state.name.title() for g in listed.valid}
