# Share-group consumption throughput (KIP-932) with 1, 4 and 16 confluent-kafka
# ShareConsumers (implicit acknowledgement) on a 1- and a 4-partition topic, beside a classic
# consumer group of as many consumers reading the same records, in the same run against one
# spawned kafkalite. Each consumer runs in its own thread (librdkafka does the I/O off the
# GIL); a run ends when every offset was delivered or at its deadline. A record counts once
# however often it was delivered (distinct partition/offset pairs; redeliveries are reported
# apart), and after the consumers close, "acknowledged" is what DescribeShareGroupOffsets'
# start offsets say the group is done with. Loopback only; bounded.
#
#   .venv/bin/python -m benchmarks.share_consume [--records 20000] [--counts 1,4,16]
from __future__ import annotations

import argparse
import json
import threading
import time
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

VALUE = b"x" * 100
DEADLINE_S = 120.0


def make_topic(bootstrap: str, partitions: int, records: int) -> str:
    topic = f"bench-share-{partitions}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 64_000})
    for i in range(records):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    return topic


def set_earliest(bootstrap: str, group: str) -> None:
    from tests.integration.test_share_groups import earliest
    earliest(bootstrap, group)


def run(make_consumer, poll, n: int, records: int) -> dict:
    """`n` consumers in threads until every offset was delivered once or the deadline.
    Counts distinct (partition, offset) pairs, so that a record delivered twice (a lock
    that ran out, a consumer that left) counts once; the extra deliveries are reported
    as redeliveries."""
    seen: set[tuple[int, int]] = set()
    deliveries = [0] * n
    lock = threading.Lock()
    done = threading.Event()
    # The clock starts before the consumers exist: joining is part of consuming, and a
    # consumer made early would otherwise fetch before the clock while the others are made.
    start = time.perf_counter()
    consumers = [make_consumer() for _ in range(n)]

    def work(i: int) -> None:
        while not done.is_set():
            got = poll(consumers[i])
            if not got:
                continue
            with lock:
                deliveries[i] += len(got)
                seen.update(got)
                if len(seen) >= records:
                    done.set()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    done.wait(DEADLINE_S)
    elapsed = time.perf_counter() - start
    done.set()
    for t in threads:
        t.join(30)
    for c in consumers:
        # librdkafka 2.16's ShareConsumer closes its session without acknowledging its last
        # poll (implicit mode): those records go back to the group, "acknowledged" shows it
        c.close()
    return {"records": len(seen), "records_per_s": round(len(seen) / elapsed),
            "redeliveries": sum(deliveries) - len(seen),
            "consumers_with_records": sum(1 for d in deliveries if d)}


def delivered(c) -> list[tuple[int, int]]:
    return [(m.partition(), m.offset()) for m in c if m.error() is None]


def acknowledged(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    """Records below each share-partition's start offset (all acknowledged or archived),
    from DescribeShareGroupOffsets: what the group will never deliver again."""
    from tests.integration.test_groups_helpers import RawClient
    c = RawClient(bootstrap)
    m = c.schema(90, 0)
    (g,) = c.call(90, 0, groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=(m.DescribeShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=tuple(range(partitions))),)),)).groups
    return sum(max(p.start_offset, 0) for t in g.topics for p in t.partitions)


def share(bootstrap: str, topic: str, n: int, records: int, partitions: int) -> dict:
    group = f"bs-{uuid.uuid4().hex[:8]}"
    set_earliest(bootstrap, group)

    def make():
        c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "max.poll.records": 500})
        c.subscribe([topic])
        return c
    out = run(make, lambda c: delivered(c.poll(0.5)), n, records)
    out["acknowledged"] = acknowledged(bootstrap, group, topic, partitions)
    return out


def classic(bootstrap: str, topic: str, n: int, records: int, partitions: int) -> dict:
    group = f"bc-{uuid.uuid4().hex[:8]}"

    def make():
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
        c.subscribe([topic])
        return c
    return run(make, lambda c: delivered(c.consume(500, 0.5)), n, records)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--counts", default="1,4,16")
    ap.add_argument("--partitions", default="1,4")
    args = ap.parse_args()
    rows = []
    with BrokerProcess(settings={"group.share.heartbeat.interval.ms": "500",
                                 "group.initial.rebalance.delay.ms": "0"}) as b:
        for k, parts in enumerate(int(x) for x in args.partitions.split(",")):
            topic = make_topic(b.bootstrap, parts, args.records)
            if k == 0:  # the broker's first share fetch creates __share_group_state (50
                # partitions), once, as Kafka does on first use: measured apart
                rows.append({"kind": "share-first-use", "partitions": parts, "consumers": 1,
                             **share(b.bootstrap, topic, 1, args.records, parts)})
                print(json.dumps(rows[-1]), flush=True)
            for n in (int(x) for x in args.counts.split(",")):
                for kind, fn in (("share", share), ("classic", classic)):
                    rows.append({"kind": kind, "partitions": parts, "consumers": n,
                                 **fn(b.bootstrap, topic, n, args.records, parts)})
                    print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"records": args.records, "value_bytes": len(VALUE), "rows": rows}))


if __name__ == "__main__":
    main()
