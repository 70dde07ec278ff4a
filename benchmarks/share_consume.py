# Share-group consumption throughput (KIP-932) with 1, 4 and 16 confluent-kafka
# ShareConsumers (implicit acknowledgement) on a 1- and a 4-partition topic, beside a classic
# consumer group of as many consumers reading the same records, in the same run against one
# spawned kafkalite. Each consumer runs in its own thread (librdkafka does the I/O off the
# GIL); a run ends when all records were seen or at its deadline. Loopback only; bounded.
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


def run(make_consumer, poll, n: int, records: int) -> tuple[float, int]:
    """(records per second, records seen) for `n` consumers in threads."""
    seen = [0] * n
    done = threading.Event()
    consumers = [make_consumer() for _ in range(n)]

    def work(i: int) -> None:
        while not done.is_set():
            seen[i] += poll(consumers[i])
            if sum(seen) >= records:
                done.set()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    done.wait(DEADLINE_S)
    elapsed = time.perf_counter() - start
    done.set()
    for t in threads:
        t.join(30)
    for c in consumers:
        c.close()
    total = sum(seen)
    return total / elapsed, total


def share(bootstrap: str, topic: str, n: int, records: int) -> tuple[float, int]:
    group = f"bs-{uuid.uuid4().hex[:8]}"
    set_earliest(bootstrap, group)

    def make():
        c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "max.poll.records": 500})
        c.subscribe([topic])
        return c
    return run(make, lambda c: sum(1 for m in c.poll(0.5) if m.error() is None), n, records)


def classic(bootstrap: str, topic: str, n: int, records: int) -> tuple[float, int]:
    group = f"bc-{uuid.uuid4().hex[:8]}"

    def make():
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
        c.subscribe([topic])
        return c
    return run(make, lambda c: sum(1 for m in c.consume(500, 0.5) if m.error() is None),
               n, records)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--counts", default="1,4,16")
    ap.add_argument("--partitions", default="1,4")
    args = ap.parse_args()
    rows = []
    with BrokerProcess(settings={"group.share.heartbeat.interval.ms": "500",
                                 "group.initial.rebalance.delay.ms": "0"}) as b:
        for parts in (int(x) for x in args.partitions.split(",")):
            topic = make_topic(b.bootstrap, parts, args.records)
            for n in (int(x) for x in args.counts.split(",")):
                for kind, fn in (("share", share), ("classic", classic)):
                    rate, got = fn(b.bootstrap, topic, n, args.records)
                    rows.append({"kind": kind, "partitions": parts, "consumers": n,
                                 "records": got, "records_per_s": round(rate)})
                    print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"records": args.records, "value_bytes": len(VALUE), "rows": rows}))


if __name__ == "__main__":
    main()
