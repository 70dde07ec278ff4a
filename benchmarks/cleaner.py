# Log cleaner throughput, kafkalite and (with --reference kafka) Apache Kafka 3.8.0 in the
# same run, on the same workload: 1 KiB records over a key space, produced with
# confluent-kafka into a topic with small segments and cleanup.policy=delete (nothing is
# cleaned while producing), then switched to compact with IncrementalAlterConfigs. From the
# switch, the live .log files of the partition directory are summed every 100 ms until the
# size has not fallen for --quiet seconds; the cleaning took until its last fall.
# Cleaned MB/s = the log's size at the switch / that time (every byte is read at least once);
# reclaimed MB/s = what went away / that time. Loopback only; every loop bounded.
#
#   .venv/bin/python -m benchmarks.cleaner [--mb 200] [--keys 20000] [--reference kafka]
from __future__ import annotations

import argparse
import glob
import json
import os
import time
import uuid
from typing import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)

from kafkalite.testing import BrokerProcess

RECORD = 1024
DEADLINE_S = 600.0
# Both brokers look for work every 200 ms (Kafka's default backoff is 15 s, which would
# dominate the measurement), and old segments leave the disk 1 s after a swap.
BROKER_SETTINGS = {"log.cleaner.backoff.ms": "200"}
TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
                "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01",
                "file.delete.delay.ms": "1000"}


def live_log_bytes(data_dir: str, topic: str) -> int:
    """Bytes of the partition's live segments (not .cleaned/.swap/.deleted files)."""
    dirs = glob.glob(os.path.join(data_dir, "**", f"{topic}-0"), recursive=True)
    total = 0
    for d in dirs:
        for f in glob.glob(os.path.join(d, "*.log")):
            try:
                total += os.path.getsize(f)
            except FileNotFoundError:
                pass  # removed between the listing and the stat
    return total


def produce(bootstrap: str, topic: str, count: int, keys: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                  "compression.type": "none", "acks": "1"})
    value = os.urandom(RECORD - 16)
    deadline = time.monotonic() + DEADLINE_S
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, key=b"key-%08d" % (i % keys))
                break
            except BufferError:
                p.poll(0.05)
                if time.monotonic() > deadline:
                    raise TimeoutError("produce did not finish in time")
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(DEADLINE_S) != 0:
        raise TimeoutError("produce did not flush in time")


def run(bootstrap: str, data_dir: str, mb: int, keys: int, quiet: float) -> dict[str, float]:
    topic = f"clean-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIG)])[topic].result(30)
    count = mb * (1 << 20) // RECORD
    produce(bootstrap, topic, count, keys)
    time.sleep(1.0)  # let the last appends reach the files
    before = live_log_bytes(data_dir, topic)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.SET)])
    start = time.monotonic()
    admin.incremental_alter_configs([res])[res].result(30)
    size, last_fall, last = before, start, before
    while time.monotonic() - last_fall < quiet and time.monotonic() - start < DEADLINE_S:
        time.sleep(0.1)
        size = live_log_bytes(data_dir, topic)
        if size < last:
            last_fall = time.monotonic()
        last = size
    took = last_fall - start
    return {"on_disk_mb_before": before / 1e6, "on_disk_mb_after": size / 1e6,
            "seconds": took, "cleaned_mb_per_s": before / 1e6 / took if took > 0 else 0.0,
            "reclaimed_mb_per_s": (before - size) / 1e6 / took if took > 0 else 0.0}


def on_each_broker(reference: str | None, lite_settings: dict[str, str],
                   work: Callable[[BrokerProcess], dict]) -> dict[str, dict]:
    """work(broker) on a spawned kafkalite and, with reference, then on a real Kafka 3.8
    (BROKER_SETTINGS), one after the other; by broker name."""
    brokers = [("kafkalite", lambda: BrokerProcess(settings=lite_settings))]
    if reference:
        from tests.helpers.real_kafka import RealKafka
        brokers.append(("kafka 3.8.0", lambda: RealKafka(settings=BROKER_SETTINGS)))
    results = {}
    for name, make in brokers:
        broker = make()
        try:
            broker.start()
            results[name] = work(broker)
        finally:
            broker.cleanup()
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200, help="MB of 1 KiB records produced")
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--quiet", type=float, default=10.0,
                    help="seconds without a fall that end the measurement")
    ap.add_argument("--reference", choices=["kafka"], default=None)
    args = ap.parse_args()
    results = on_each_broker(args.reference, BROKER_SETTINGS, lambda b: run(
        b.bootstrap, b.data_dir, args.mb, args.keys, args.quiet))
    for key in results["kafkalite"]:
        print(f"{key:<20} " + "  ".join(f"{n}: {r[key]:>9.2f}" for n, r in results.items()))
    print(json.dumps(results))

if __name__ == "__main__":
    main()
