"""Rebalance time of a consumer group: classic protocol versus KIP-848 (consumer protocol).

    python -m benchmarks.rebalance [--members 10,25,50] [--partitions 100] [--kafka]

For each group size N, N confluent-kafka consumers (one process, polled round-robin)
subscribe to one topic, and two times are measured:
  join    from the first subscribe until every partition is owned by exactly one member and
          every member owns at least one (as the on_assign/on_revoke callbacks report);
  scale   after that, one more consumer subscribes: until the same holds for N+1 members.
Classic: confluent-kafka's default (range,roundrobin, eager). Consumer: group.protocol=
consumer with the broker's `uniform` assignor. Both brokers get the same group settings
(SETTINGS: no initial rebalance delay, 500 ms KIP-848 heartbeat interval, as the client's
classic heartbeat.interval.ms below). --kafka also times the classic protocol on the real
Kafka 3.8 (which cannot serve librdkafka's consumer protocol: it has ConsumerGroupHeartbeat
v0 only). Every wait is bounded by --timeout; a run that hits it reports INCOMPLETE and the
command exits 1. Traffic stays on 127.0.0.1.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
import uuid
from typing import Iterator

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

SETTINGS = {"group.initial.rebalance.delay.ms": "0",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "500"}
KAFKA_SETTINGS = {**SETTINGS, "group.coordinator.rebalance.protocols": "classic,consumer"}
CLIENT = {"classic": {"heartbeat.interval.ms": "500", "session.timeout.ms": "10000"},
          "consumer": {"group.protocol": "consumer"}}


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str):
        self.owned: set[int] = set()
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           **CLIENT[protocol]})
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, c, parts) -> None:
        self.owned |= {p.partition for p in parts}

    def _revoke(self, c, parts) -> None:
        self.owned -= {p.partition for p in parts}


def balanced(members: list[Member], partitions: int) -> bool:
    total = sum(len(m.owned) for m in members)
    return (total == partitions and all(m.owned for m in members)
            and len(set().union(*(m.owned for m in members))) == partitions)


def wait_balanced(members: list[Member], partitions: int, timeout: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        for m in members:
            m.c.poll(0)
        if balanced(members, partitions):
            return time.monotonic() - start
        time.sleep(0.005)
    return None


def measure(bootstrap: str, protocol: str, n: int, partitions: int,
            timeout: float) -> tuple[float | None, float | None]:
    topic, group = f"rb-{uuid.uuid4().hex[:8]}", f"rb-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Kafka's metadata catches up asynchronously
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            break
        time.sleep(0.2)
    members: list[Member] = []
    try:
        start = time.monotonic()
        members = [Member(bootstrap, group, topic, protocol) for _ in range(n)]
        joined = wait_balanced(members, partitions, timeout)
        join = None if joined is None else time.monotonic() - start
        scale = None
        if join is not None:
            members.append(Member(bootstrap, group, topic, protocol))
            scale = wait_balanced(members, partitions, timeout)
        return join, scale
    finally:
        for m in members:
            m.c.close()
        admin.delete_topics([topic])[topic].result(30)


@contextlib.contextmanager
def kafka() -> Iterator[str]:
    from tests.helpers.real_kafka import RealKafka
    k = RealKafka(settings=KAFKA_SETTINGS)
    k.start()
    try:
        yield k.bootstrap
    finally:
        k.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.rebalance",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--members", default="10,25,50")
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per wait")
    ap.add_argument("--kafka", action="store_true",
                    help="also the classic protocol on the real Kafka 3.8")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.members.split(",")]
    rows: list[tuple[str, str, int, float | None, float | None]] = []
    with contextlib.ExitStack() as stack:
        from tests.integration.test_consumer_protocol_restart import low_port
        lite = stack.enter_context(BrokerProcess(port=low_port(), settings=SETTINGS))
        targets = [("kafkalite", lite.bootstrap, ("classic", "consumer"))]
        if args.kafka:
            targets.append(("kafka-3.8", stack.enter_context(kafka()), ("classic",)))
        for name, bootstrap, protocols in targets:
            for n in sizes:
                for protocol in protocols:
                    join, scale = measure(bootstrap, protocol, n, args.partitions, args.timeout)
                    rows.append((name, protocol, n, join, scale))
                    print(f"{name:10} {protocol:9} {n:3} members: join {fmt(join)}, "
                          f"+1 member {fmt(scale)}", flush=True)
    print("\n| broker | protocol | members | join (s) | +1 member (s) |\n|---|---|---|---|---|")
    for name, protocol, n, join, scale in rows:
        print(f"| {name} | {protocol} | {n} | {fmt(join)} | {fmt(scale)} |")
    return 1 if any(j is None or s is None for *_, j, s in rows) else 0


def fmt(t: float | None) -> str:
    return "INCOMPLETE" if t is None else f"{t:.2f}"


if __name__ == "__main__":
    sys.exit(main())
