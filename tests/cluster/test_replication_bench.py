# RF=3 acks=all throughput and latency, kafkalite against Apache Kafka 3.8.0 in ZooKeeper mode,
# side by side in one run (issue 17's benchmark, first cut): confluent-kafka, idempotent,
# 50000 records of 100 bytes to one partition, then 300 records one at a time (produce + flush)
# for the latency. Behind KAFKALITE_LONG=1 (about a minute; three JVMs):
#   KAFKALITE_LONG=1 PYTHONPATH=$PWD .venv/bin/python -m pytest -p no:cacheprovider -q -s \
#       tests/cluster/test_replication_bench.py
from __future__ import annotations

import os
import time

import pytest

from tests.cluster.test_membership import brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_replication_vs_kafka import TOPIC, create_led, kafka_cluster  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id, states
from tests.helpers.real_kafka import eventually

pytestmark = pytest.mark.skipif(os.environ.get("KAFKALITE_LONG") != "1",
                                reason="a benchmark: KAFKALITE_LONG=1")
RECORDS, SIZE, ONE_BY_ONE = 50000, 100, 300


def bench(procs: dict, z, label: str) -> str:
    import confluent_kafka as ck
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=20)
    eventually(lambda: create_led(procs[cid].bootstrap, [cid, *(i for i in procs if i != cid)]),
               lambda r: r.error_code == 0, timeout=20)
    eventually(lambda: states(z, TOPIC, [0]).get(0),
               lambda s: s is not None and len(s.isr) == 3, timeout=20)
    p = ck.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in procs.values()),
                     "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    for _ in range(200):  # metadata, connections, the leader found
        p.produce(TOPIC, b"w", partition=0)
    assert p.flush(30) == 0
    acked: list = []
    value = b"x" * SIZE
    t0 = time.monotonic()
    for _ in range(RECORDS):
        while True:
            try:
                p.produce(TOPIC, value, partition=0,
                          on_delivery=lambda e, m: e is None and acked.append(1))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - t0
    latencies = []
    for _ in range(ONE_BY_ONE):
        t1 = time.monotonic()
        p.produce(TOPIC, value, partition=0)
        p.flush(10)
        latencies.append((time.monotonic() - t1) * 1000)
    latencies.sort()
    assert len(acked) == RECORDS
    return (f"{label}: RF=3 acks=all idempotent {RECORDS / elapsed:.0f} records/s "
            f"({RECORDS * SIZE / elapsed / 1e6:.1f} MB/s), one at a time p50 "
            f"{latencies[ONE_BY_ONE // 2]:.2f} ms p99 {latencies[ONE_BY_ONE * 99 // 100]:.2f} ms")


def test_rf3_acks_all_against_kafka(brokers, zk, kafka_cluster):
    kafka_procs, kafka_z = kafka_cluster
    lines = [bench(kafka_procs, kafka_z, "Kafka 3.8.0 (ZooKeeper mode)")]
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3)))
    z = zk()
    registered(z, {1, 2, 3})
    lines.append(bench(procs, z, "kafkalite"))
    print("\n" + "\n".join(lines))
