# `python -m spark_pipeline.generate`: produce clickstream events to kafkalite.
#
# Produces rate × duration JSON events (see events.py), keyed by user id, with the Kafka record
# timestamp set to the event time, through confluent-kafka. Events are paced at `rate` per
# second of wall-clock time, or `--speedup` times faster (0 = as fast as the producer goes),
# while event time always advances at `rate` events per second from --start-ms; so a test or
# the demo can produce an hour of event time in a few seconds. Prints a progress line about once
# a second and a summary at the end; stops by itself. Exit status 1 when any record failed.
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from .events import ClickstreamGenerator

PROGRESS_EVERY_S = 1.0


@dataclass
class ProduceStats:
    produced: int = 0
    failed: int = 0
    late: int = 0
    malformed: int = 0
    first_error: str | None = None


def produce(bootstrap: str, topic: str, generator: ClickstreamGenerator, count: int,
            speedup: float = 1.0, out=sys.stdout, producer_conf: dict | None = None,
            flush_timeout_s: float = 60.0) -> ProduceStats:
    """Produce `count` records from `generator`; returns counts of delivered and failed ones."""
    from confluent_kafka import Producer

    stats = ProduceStats()

    def delivered(err, _msg) -> None:
        if err is None:
            stats.produced += 1
        else:
            stats.failed += 1
            stats.first_error = stats.first_error or str(err)

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
            "client.id": "spark-pipeline-generator", **(producer_conf or {})}
    producer = Producer(conf)
    began = time.monotonic()
    next_report = began + PROGRESS_EVERY_S
    for i, rec in enumerate(generator.records(count)):
        if speedup > 0:
            due = began + i / (generator.rate * speedup)
            while (delay := due - time.monotonic()) > 0:
                producer.poll(min(delay, 0.1))
        stats.late += rec.late
        stats.malformed += rec.event is None
        while True:
            try:
                producer.produce(topic, rec.value, rec.key, timestamp=rec.timestamp_ms,
                                 on_delivery=delivered)
                break
            except BufferError:  # local queue full: let deliveries drain, bounded by flush
                producer.poll(0.1)
        producer.poll(0)
        if time.monotonic() >= next_report:
            next_report += PROGRESS_EVERY_S
            print(f"generate: {i + 1}/{count} sent, {stats.produced} acked, {stats.failed} failed",
                  file=out, flush=True)
    remaining = producer.flush(flush_timeout_s)
    stats.failed += remaining
    if remaining and not stats.first_error:
        stats.first_error = f"{remaining} records not acknowledged within {flush_timeout_s}s"
    print(f"generate: done: {stats.produced} events to {topic!r} in "
          f"{time.monotonic() - began:.1f}s ({stats.late} late, {stats.malformed} malformed, "
          f"{stats.failed} failed)", file=out, flush=True)
    return stats


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m spark_pipeline.generate",
                                description="Produce clickstream events to a Kafka topic.")
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    p.add_argument("--topic", default="clickstream")
    p.add_argument("--rate", type=float, default=50.0, help="events per second (default 50)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds of event time to produce (default 10); rate*duration events")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed; the same seed and options give the same events")
    p.add_argument("--start-ms", type=int, default=None,
                   help="event time of the first event, epoch ms (default: now)")
    p.add_argument("--speedup", type=float, default=1.0,
                   help="produce this many times faster than real time; 0 = no pacing")
    p.add_argument("--users", type=int, default=200, help="simulated users (default 200)")
    p.add_argument("--late-ratio", type=float, default=0.01,
                   help="fraction of events whose event time is 20-240 s in the past")
    p.add_argument("--bad-ratio", type=float, default=0.0,
                   help="fraction of malformed records, for the dead-letter path (default 0)")
    args = p.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0:
        p.error("--rate and --duration must be positive")
    if args.speedup < 0:
        p.error("--speedup must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    start_ms = args.start_ms if args.start_ms is not None else int(time.time() * 1000)
    count = int(round(args.rate * args.duration))
    gen = ClickstreamGenerator(seed=seed, rate=args.rate, start_ms=start_ms, users=args.users,
                               late_ratio=args.late_ratio, bad_ratio=args.bad_ratio)
    print(f"generate: {count} events to {args.topic!r} at {args.bootstrap} "
          f"(seed {seed}, start {start_ms})", flush=True)
    stats = produce(args.bootstrap, args.topic, gen, count, speedup=args.speedup)
    if stats.failed:
        print(f"generate: {stats.failed} records failed: {stats.first_error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
