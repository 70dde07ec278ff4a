# Transactional produce (N records per transaction) and read_committed consume, with
# confluent-kafka, against kafkalite and (with --reference kafka) Apache Kafka 3.8.0 in the
# same run. Loopback only; every loop bounded by count and time.
#
#   .venv/bin/python -m benchmarks.txn_bench [--records 200000] [--reference kafka]
from __future__ import annotations

import argparse
import json
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import BrokerProcess

VALUE = b"x" * 100
DEADLINE_S = 300.0


def produce_txn(bootstrap: str, topic: str, total: int, per_txn: int) -> float:
    """Records per second of `total` records in transactions of `per_txn`."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"b-{uuid.uuid4()}",
                  "linger.ms": 5, "batch.size": 1_000_000})
    p.init_transactions(30)
    start = time.perf_counter()
    for _ in range(total // per_txn):
        p.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    p.produce(topic, VALUE, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(60)
        if time.perf_counter() - start > DEADLINE_S:
            raise TimeoutError("transactional produce exceeded its deadline")
    return total / (time.perf_counter() - start)


def consume_committed(bootstrap: str, topic: str, expected: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    start = time.perf_counter()
    while seen < expected and time.perf_counter() - start < DEADLINE_S:
        for m in c.consume(10_000, 1.0):
            if not m.error():
                seen += 1
    elapsed = time.perf_counter() - start
    c.close()
    if seen < expected:
        raise TimeoutError(f"read_committed consume saw {seen} of {expected}")
    return seen / elapsed


def run(bootstrap: str, total: int) -> dict:
    from tests.helpers.real_kafka import create_topic
    out = {}
    for per_txn in (100, 10_000):
        topic = f"txb-{per_txn}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic)
        out[f"txn produce {per_txn}/txn (rec/s)"] = produce_txn(bootstrap, topic, total,
                                                                 per_txn)
        out[f"read_committed consume {per_txn}/txn (rec/s)"] = consume_committed(
            bootstrap, topic, total)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reference", choices=["kafka"], default=None)
    args = ap.parse_args()
    results = {}
    with BrokerProcess() as bp:
        results["kafkalite"] = run(bp.bootstrap, args.records)
    if args.reference:
        from tests.helpers.real_kafka import RealKafka
        kafka = RealKafka()
        try:
            kafka.start()
            results["kafka 3.8.0"] = run(kafka.bootstrap, args.records)
        finally:
            kafka.cleanup()
    names = list(results)
    for key in results[names[0]]:
        row = "  ".join(f"{n}: {results[n][key]:>10,.0f}" for n in names)
        print(f"{key:<42} {row}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
