# Produce latency while the log cleaner works, kafkalite and (with --reference kafka)
# Apache Kafka 3.8.0 in the same run. Per broker:
#
# 1. A large dirty topic: --mb MB of 1 KiB records over --keys keys, produced with
#    cleanup.policy=delete (nothing cleaned yet), small segments (benchmarks/cleaner.py's).
# 2. idle: one record at a time (confluent-kafka, acks=all, linger.ms=0, each awaited before
#    the next) into a plain topic for --seconds or --count records; the latency of each is
#    produce() to its delivery report.
# 3. cleaning: the dirty topic is switched to compact (IncrementalAlterConfigs) and the same
#    produce runs again, while the partition directory's live .log bytes are summed every
#    100 ms; only the records sent between the switch and the last fall of that size (while
#    the cleaner was rewriting) count; their number is printed.
# The sampler runs in a process of its own in both phases, beside the same size polling.
#
# Printed per broker: p50/p99/max of both phases and "p99 cleaning / p99 idle"; then
# kafkalite's figures over Kafka's. Loopback only; every loop bounded in count and time.
#
#   .venv/bin/python -m benchmarks.cleaner_load [--mb 200] [--keys 20000] [--reference kafka]
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)

from benchmarks.cleaner import (BROKER_SETTINGS, TOPIC_CONFIG, live_log_bytes, on_each_broker,
                               produce)

DEADLINE_S = 600.0
GAP_S = 0.002  # between one acknowledgement and the next send: ~400 records/s


def sample(bootstrap: str, topic: str, count: int, seconds: float, stop: Any = None,
           ready: Any = None) -> list[tuple[float, float]]:
    """(send time, latency in ms) of records sent one at a time, acks=all; `ready` is set
    once the producer is connected."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": False, "message.timeout.ms": 30000})
    out: list[tuple[float, float]] = []
    done: list[float] = []

    def on_delivery(err, _msg):
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        done.append(time.perf_counter())

    p.produce(topic, b"warm-up", on_delivery=on_delivery)  # connection and metadata
    p.flush(30)
    if ready is not None:
        ready.set()
    end = time.monotonic() + seconds
    value = b"x" * 100
    while len(out) < count and time.monotonic() < end and not (stop and stop.is_set()):
        done.clear()
        t0 = time.perf_counter()
        p.produce(topic, value, on_delivery=on_delivery)
        p.flush(30)
        if not done:
            raise TimeoutError("a record was not acknowledged in 30 s")
        out.append((t0, (done[0] - t0) * 1000))
        time.sleep(GAP_S)
    return out


def percentiles(lat: list[float]) -> dict[str, float]:
    if len(lat) < 2:
        return {"n": len(lat), "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    q = statistics.quantiles(lat, n=100, method="inclusive")
    return {"n": len(lat), "p50": q[49], "p99": q[98], "max": max(lat)}


def _sampler(args: tuple, out: Any) -> None:
    out.put(sample(*args))


class Sampler:
    """sample() in a process of its own, so that the watch's Python work in this one (the
    size polling) cannot delay the sampler's delivery callbacks (a GIL of its own)."""

    def __init__(self, bootstrap: str, topic: str, count: int):
        ctx = multiprocessing.get_context("spawn")
        self.stop, ready, self.out = ctx.Event(), ctx.Event(), ctx.Queue()
        self.proc = ctx.Process(target=_sampler, args=(
            (bootstrap, topic, count, DEADLINE_S, self.stop, ready), self.out))
        self.proc.start()
        if not ready.wait(60):
            self.proc.kill()
            raise TimeoutError("the sampler did not connect in 60 s")

    def finish(self) -> list[tuple[float, float]]:
        self.stop.set()
        got = self.out.get(timeout=120)
        self.proc.join(30)
        return got


def watch(data_dir: str, topic: str, sampler: Sampler, start: float, before: int,
          seconds: float | None) -> tuple[int, float]:
    """Poll the topic's live .log bytes every 100 ms for `seconds`, or (None) until the
    size has fallen and then not for 5 s (the first fall comes after the dedupe map of the
    whole dirty section is built); returns the last size and the time of its last fall."""
    last, last_fall = before, start
    deadline = time.monotonic() + (seconds if seconds is not None else DEADLINE_S)
    while time.monotonic() < deadline and sampler.proc.is_alive() and (
            seconds is not None or last == before or time.perf_counter() - last_fall < 5):
        time.sleep(0.1)
        size = live_log_bytes(data_dir, topic)
        if size < last:
            last_fall = time.perf_counter()
        last = size
    return last, last_fall


def run(bootstrap: str, data_dir: str, mb: int, keys: int, count: int,
        seconds: float) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    dirty, plain = f"dirty-{uuid.uuid4().hex[:8]}", f"plain-{uuid.uuid4().hex[:8]}"
    futs = admin.create_topics([NewTopic(dirty, 1, 1, config=TOPIC_CONFIG),
                                NewTopic(plain, 1, 1)])
    for f in futs.values():
        f.result(30)
    produce(bootstrap, dirty, mb * (1 << 20) // 1024, keys)
    time.sleep(2.0)  # the dirty produce's appends and flushes settle
    before = live_log_bytes(data_dir, dirty)
    # idle: the same sampling and polling, no cleaning
    sampler = Sampler(bootstrap, plain, count)
    watch(data_dir, dirty, sampler, time.perf_counter(), before, seconds)
    idle = [lat for _, lat in sampler.finish()]
    sampler = Sampler(bootstrap, plain, count)
    res = ConfigResource(ConfigResource.Type.TOPIC, dirty, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    switch = time.perf_counter()
    admin.incremental_alter_configs([res])[res].result(30)
    last, last_fall = watch(data_dir, dirty, sampler, switch, before, None)
    # perf_counter is CLOCK_MONOTONIC: the sampler's send times compare with these
    during = [lat for t, lat in sampler.finish() if switch <= t <= last_fall]
    out = {"idle": percentiles(idle), "cleaning": percentiles(during),
           "cleaning_s": last_fall - switch, "mb_before": before / 1e6, "mb_after": last / 1e6}
    out["p99_ratio"] = out["cleaning"]["p99"] / out["idle"]["p99"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200, help="MB of 1 KiB records to clean")
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--count", type=int, default=20_000, help="records per latency phase")
    ap.add_argument("--seconds", type=float, default=15.0, help="idle phase length")
    ap.add_argument("--reference", choices=["kafka"], default=None)
    ap.add_argument("--broker-set", action="append", default=[], metavar="K=V",
                    help="extra kafkalite setting")
    args = ap.parse_args()
    lite = dict(BROKER_SETTINGS, **dict(kv.split("=", 1) for kv in args.broker_set))
    results = on_each_broker(args.reference, lite, lambda b: run(
        b.bootstrap, b.data_dir, args.mb, args.keys, args.count, args.seconds))
    for name, r in results.items():
        i, c = r["idle"], r["cleaning"]
        print(f"{name:<12} idle p50/p99/max {i['p50']:.2f}/{i['p99']:.2f}/{i['max']:.1f} ms "
              f"(n={i['n']})  cleaning p50/p99/max {c['p50']:.2f}/{c['p99']:.2f}/"
              f"{c['max']:.1f} ms (n={c['n']}, {r['cleaning_s']:.1f} s, "
              f"{r['mb_before']:.0f} -> {r['mb_after']:.0f} MB)  "
              f"p99 cleaning/idle {r['p99_ratio']:.2f}")
    if len(results) == 2:
        lite_r, kafka_r = results["kafkalite"], results["kafka 3.8.0"]
        print("kafkalite/kafka  p99 idle {:.2f}  p99 cleaning {:.2f}  ratio {:.2f}".format(
            lite_r["idle"]["p99"] / kafka_r["idle"]["p99"],
            lite_r["cleaning"]["p99"] / kafka_r["cleaning"]["p99"],
            lite_r["p99_ratio"] / kafka_r["p99_ratio"]))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
