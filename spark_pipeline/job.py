# `python -m spark_pipeline.job`: the Structured Streaming job.
#
# Reads the clickstream with readStream.format("kafka"), splits valid events from dead letters
# (transform.py), and runs up to three queries, each with its own checkpoint under --checkpoint:
#   page_stats    windowed per-page stats -> writeStream.format("kafka") to --output-topic
#   dead_letters  unparsable records -> writeStream.format("kafka") to --dlq-topic
#   parquet       the same stats -> Parquet files (only with --parquet)
# Output mode is append: a window is written once, when the watermark passes its end, and the
# state and offsets in the checkpoint let a restarted job carry on where it stopped without
# re-emitting finished windows. (Spark's Kafka sink is at-least-once: a crash between writing a
# batch and committing it re-sends that batch on restart; consumers that must be exact dedupe
# on key + window_start.) On SIGINT/SIGTERM the job waits for the running micro-batch to end
# before stopping, so a normal stop never leaves such a half-done batch.
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass

from .connector import SparkUnavailable

STOP_WAIT_S = 120.0


@dataclass
class JobOptions:
    bootstrap: str
    checkpoint: str
    input_topic: str = "clickstream"
    output_topic: str = "page_stats"
    dlq_topic: str = "clickstream_dlq"
    parquet: str | None = None
    trigger: str = "available-now"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    window: str = "1 minute"
    watermark: str = "2 minutes"


def trigger_kwargs(trigger: str) -> dict:
    """--trigger value -> keyword arguments of DataStreamWriter.trigger()."""
    if trigger == "available-now":
        return {"availableNow": True}
    m = re.fullmatch(r"processing-time=(\d+(?:\.\d+)?\s*(?:ms|s|seconds?|minutes?)?)", trigger)
    if not m:
        raise ValueError(f"--trigger must be available-now or processing-time=<interval> "
                         f"(e.g. processing-time=10s), not {trigger!r}")
    interval = m.group(1)
    interval = re.sub(r"^(\d+(?:\.\d+)?)\s*s$", r"\1 seconds", interval)
    interval = re.sub(r"^(\d+(?:\.\d+)?)\s*ms$", r"\1 milliseconds", interval)
    if re.fullmatch(r"\d+(?:\.\d+)?", interval):
        interval += " seconds"
    return {"processingTime": interval}


def source(spark, opts: JobOptions):
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", opts.bootstrap)
              .option("subscribe", opts.input_topic)
              .option("startingOffsets", opts.starting_offsets))
    if opts.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(opts.max_offsets_per_trigger))
    return reader.load()


def start_queries(spark, opts: JobOptions) -> list:
    """Start the job's streaming queries; returns them (already running)."""
    from . import transform as t

    trig = trigger_kwargs(opts.trigger)
    parsed = t.parse_events(source(spark, opts))
    stats = t.page_stats(t.valid_events(parsed), opts.window, opts.watermark)

    def kafka_sink(df, name: str, topic: str):
        return (df.writeStream.queryName(name).format("kafka").outputMode("append")
                .option("kafka.bootstrap.servers", opts.bootstrap).option("topic", topic)
                .option("checkpointLocation", os.path.join(opts.checkpoint, name))
                .trigger(**trig))

    writers = [kafka_sink(t.stats_to_kafka(stats), "page_stats", opts.output_topic),
               kafka_sink(t.dead_letters_to_kafka(t.dead_letters(parsed)), "dead_letters",
                          opts.dlq_topic)]
    if opts.parquet:
        writers.append(stats.writeStream.queryName("parquet").format("parquet")
                       .outputMode("append").option("path", opts.parquet)
                       .option("checkpointLocation", os.path.join(opts.checkpoint, "parquet"))
                       .trigger(**trig))
    queries = []
    try:
        for w in writers:
            queries.append(w.start())
    except Exception:
        for q in queries:
            q.stop()
        raise
    return queries


def summary(query) -> str:
    progress = query.recentProgress
    rows_in = sum(p.get("numInputRows", 0) or 0 for p in progress)
    outs = [(p.get("sink") or {}).get("numOutputRows", -1) for p in progress]
    # the file sink reports -1: it does not count rows
    rows_out = f"{sum(outs)} output rows" if all(n >= 0 for n in outs) else "output rows n/a"
    # Spark keeps the progress of the last 100 batches (numRecentProgressUpdates)
    batches = (f"{len(progress)} batches in this run" if len(progress) < 100
               else f"the last {len(progress)} batches")
    return f"job: {query.name}: {batches}, {rows_in} input rows, {rows_out}"


def stop_gracefully(queries: list, wait_s: float = STOP_WAIT_S) -> None:
    """Stop each query between micro-batches, so no half-written batch is left behind."""
    deadline = time.monotonic() + wait_s
    for q in queries:
        while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.2)
        q.stop()


def run(spark, opts: JobOptions, out=sys.stdout) -> None:
    """Run the job until it finishes (available-now) or is asked to stop (SIGINT/SIGTERM)."""
    queries = start_queries(spark, opts)
    stopping = []

    def on_signal(signum, _frame) -> None:
        stopping.append(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():  # only there can Python trap them
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while any(q.isActive for q in queries) and not stopping:
            for q in queries:
                q.awaitTermination(1)  # raises StreamingQueryException if the query failed
        if stopping:
            print("job: stopping after the current micro-batch", file=out, flush=True)
            stop_gracefully(queries)
        for q in queries:
            q.awaitTermination(1)
            print(summary(q), file=out, flush=True)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        for q in queries:
            if q.isActive:
                q.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m spark_pipeline.job",
                                description="Windowed clickstream stats from Kafka to Kafka.")
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it to resume)")
    p.add_argument("--input-topic", default="clickstream")
    p.add_argument("--output-topic", default="page_stats")
    p.add_argument("--dlq-topic", default="clickstream_dlq",
                   help="topic for records that cannot be parsed (default clickstream_dlq)")
    p.add_argument("--parquet", default=None, help="also write the stats as Parquet here")
    p.add_argument("--trigger", default="available-now",
                   help="available-now (process what is there, then stop) or "
                        "processing-time=10s (run until stopped)")
    p.add_argument("--starting-offsets", default="earliest",
                   help="earliest, latest or per-partition JSON; only for a new checkpoint")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--jars", default=None,
                   help="connector jars, comma-separated files or directories "
                        "(also KAFKALITE_SPARK_JARS)")
    p.add_argument("--ivy-settings", default=None, help="Ivy settings file for resolution")
    p.add_argument("--offline", action="store_true",
                   help="never resolve from the network; only ~/.m2 or --jars")
    args = p.parse_args(argv)
    try:
        trigger_kwargs(args.trigger)
    except ValueError as exc:
        p.error(str(exc))
    return args


def options_from_args(args: argparse.Namespace) -> JobOptions:
    return JobOptions(bootstrap=args.bootstrap, checkpoint=args.checkpoint,
                      input_topic=args.input_topic, output_topic=args.output_topic,
                      dlq_topic=args.dlq_topic, parquet=args.parquet, trigger=args.trigger,
                      starting_offsets=args.starting_offsets,
                      max_offsets_per_trigger=args.max_offsets_per_trigger)


def unreachable(bootstrap: str, timeout_s: float = 5.0) -> str | None:
    """Why no bootstrap server accepts a connection, or None when one does. Checked before
    Spark starts: its Kafka admin client would otherwise retry for minutes."""
    problems = []
    for server in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return None
        except (OSError, ValueError) as exc:
            problems.append(f"{server}: {exc}")
    return "no broker reachable: " + ("; ".join(problems) or f"empty --bootstrap {bootstrap!r}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from .session import session_with_connector

    problem = unreachable(args.bootstrap)
    if problem:
        print(f"job: {problem}", file=sys.stderr)
        return 2

    try:
        spark, plan = session_with_connector(
            "kafkalite-clickstream-job", args.jars, args.ivy_settings, args.offline,
            say=lambda msg: print(f"job: {msg}", flush=True))
    except SparkUnavailable as exc:
        print(f"job: {exc}", file=sys.stderr)
        return 2
    try:
        run(spark, options_from_args(args))
        return 0
    except Exception as exc:  # a failed query: say which and why, without a JVM stack dump
        print(f"job: failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
              file=sys.stderr)
        return 1
    finally:
        spark.stop()
        plan.cleanup()


if __name__ == "__main__":
    sys.exit(main())
