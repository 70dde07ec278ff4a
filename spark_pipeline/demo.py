# `python -m spark_pipeline.demo`: the whole pipeline on one machine, then cleaned up.
#
# Starts a kafkalite broker on a free 127.0.0.1 port with a temporary data directory, produces
# a few thousand clickstream events (some late, a few malformed), runs the streaming job once
# with the available-now trigger, reads page_stats back with spark.read.format("kafka") and
# prints the top pages of each finished window. Windows in the last two minutes of event time
# stay open (append mode emits a window once the watermark passes it), as they would in a
# running job waiting for more events.
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time

from .connector import SparkUnavailable
from .events import ClickstreamGenerator
from .generate import produce
from .job import JobOptions, run

MIN = 60_000


def top_pages_table(rows: list[dict], top: int) -> str:
    """page_stats rows (dicts) -> a text table: per window the `top` pages by views, and the
    page with the most purchases."""
    by_window: dict[str, list[dict]] = {}
    for r in rows:
        by_window.setdefault(r["window_start"], []).append(r)
    head = (f"{'window (UTC)':<13} {'page':<22} {'views':>5} {'users':>5} {'clicks':>6} "
            f"{'buys':>4} {'conv':>6}")
    lines = [head, "-" * len(head)]
    for start in sorted(by_window):
        ranked = sorted(by_window[start], key=lambda r: (-r["views"], -r["events"], r["page"]))
        total = sum(r["events"] for r in ranked)
        buys = sum(r["purchases"] for r in ranked)
        shown = ranked[:top]
        best = max(ranked, key=lambda r: (r["purchases"], r["conversion_rate"]))
        if best["purchases"] and best not in shown:
            shown.append(best)  # the page that sold most, even when not among the most viewed
        for i, r in enumerate(shown):
            label = (f"{start[11:16]}-{r['window_end'][11:16]}" if i == 0 else
                     f"{total} events" if i == 1 else f"{buys} purchases" if i == 2 else "")
            lines.append(f"{label:<13} {r['page']:<22} {r['views']:>5} {r['unique_users']:>5} "
                         f"{r['clicks']:>6} {r['purchases']:>4} {r['conversion_rate']:>6.1%}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m spark_pipeline.demo",
                                description="Broker + generator + streaming job, end to end.")
    p.add_argument("--rate", type=float, default=10.0, help="events per second of event time")
    p.add_argument("--minutes", type=int, default=6, help="minutes of event time (default 6)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--top", type=int, default=4, help="pages shown per window (default 4)")
    p.add_argument("--jars", default=None, help="connector jars (see the job's --jars)")
    p.add_argument("--offline", action="store_true", help="resolve the connector from ~/.m2 only")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from kafkalite.testing import BrokerProcess

    from .connector import spark_install
    from .session import session_with_connector

    began = time.monotonic()
    try:
        spark_install()  # no pyspark: one line naming the install command, not a traceback
        print("demo: starting Spark (local[2])", flush=True)
        spark, plan = session_with_connector("kafkalite-demo", args.jars, None, args.offline,
                                             say=lambda msg: print(f"demo: {msg}", flush=True))
    except SparkUnavailable as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    from . import transform as t

    work = tempfile.mkdtemp(prefix="kafkalite-demo-")
    broker = BrokerProcess(data_dir=f"{work}/broker")
    try:
        broker.start()
        print(f"demo: kafkalite broker on {broker.bootstrap} (data in {work}/broker)")
        count = int(args.rate * args.minutes * 60)
        start = (int(time.time() * 1000) // MIN - args.minutes - 2) * MIN
        gen = ClickstreamGenerator(seed=args.seed, rate=args.rate, start_ms=start,
                                   late_ratio=0.02, bad_ratio=0.005)
        stats = produce(broker.bootstrap, "clickstream", gen, count, speedup=0)
        if stats.failed:
            print(f"demo: producing failed: {stats.first_error}", file=sys.stderr)
            return 1
        run(spark, JobOptions(bootstrap=broker.bootstrap, checkpoint=f"{work}/checkpoint"))

        def read(topic: str):
            return (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic).option("startingOffsets", "earliest").load())

        rows = [r.asDict() for r in t.read_stats(read("page_stats")).collect()]
        dead = read("clickstream_dlq").count()
        # late events from before the first one produced make a few sparse windows: count them,
        # show the windows of the stream itself
        shown = [r for r in rows if r["window_start_ms"] >= start]
        early = len({r["window_start"] for r in rows}) - len({r["window_start"] for r in shown})
        print()
        print(top_pages_table(shown, args.top))
        print()
        windows = len({r["window_start"] for r in rows})
        print(f"demo: {count} events ({stats.late} late, {stats.malformed} malformed) -> "
              f"{len(rows)} page stats in {windows} closed windows on 'page_stats' ({early} of "
              f"them before the stream's start, holding late events only), {dead} dead letters "
              f"on 'clickstream_dlq'; {time.monotonic() - began:.0f}s in all")
        spark.sparkContext.setLogLevel("ERROR")  # cached producers would warn once it stops
        return 0
    finally:
        spark.stop()
        plan.cleanup()
        broker.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
