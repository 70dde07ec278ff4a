# Crash consistency: SIGKILL the broker at random moments under load, restart, verify.
#
#   python -m benchmarks.reliability.crash --cycles 200 [--mode page-cache|fsync|both]
#
# Load: two idempotent confluent-kafka producers (acks=all; one uncompressed, one lz4) on the
# four partitions of `data` (no retention, 16 KiB segments: rolls every few batches); one
# idempotent producer on `churn` (8 KiB segments, retention.bytes 24 KiB, checked every
# 100 ms: segments are deleted continuously); a subscribed group consumer on `data` that
# commits synchronously every 0.3 s.
# Kill moments, one per cycle, drawn in turn: after a random delay; just after a new
# segment file appears (a roll); just after the broker logs a retention deletion; while the
# consumer's synchronous commit is in flight.
# After each restart: the broker must answer ApiVersions within --start-timeout seconds; the
# Model (verify.py) reads everything new (CRC-checked) and settles acknowledgements; the
# group's committed offsets must not be below any commit the broker acknowledged.
# Producers and the consumer keep running across kills, so retries after a restart exercise
# duplicate detection from the recovered producer state.
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

from .common import Broker, Conn, create_topic, emit, list_offsets, offset_fetch
from .verify import Model
from .workers import GroupConsumer, ProducerWorker

DATA, CHURN, GROUP = "data", "churn", "crash-group"
DATA_PARTS = [0, 1, 2, 3]
KILL_MODES = ("random", "roll", "retention", "commit")

BROKER_SETTINGS = {
    "log.segment.bytes": "16384",
    "log.retention.check.interval.ms": "100",
    "log.segment.delete.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
}
CHURN_CONFIGS = {"segment.bytes": "8192", "retention.bytes": "24576", "retention.ms": "-1"}
DATA_CONFIGS = {"retention.ms": "-1", "retention.bytes": "-1"}


class LogTail:
    """New lines of the broker log since the last call (reads only the new bytes)."""

    def __init__(self, path: str):
        self.path = path
        self.pos = os.path.getsize(path) if os.path.exists(path) else 0

    def new_text(self) -> str:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return ""
        self.pos += len(data)
        return data.decode("utf-8", "replace")


def _segments(data_dir: str) -> int:
    n = 0
    for d in (f"{DATA}-{p}" for p in DATA_PARTS):
        try:
            n += sum(1 for f in os.listdir(os.path.join(data_dir, d)) if f.endswith(".log"))
        except FileNotFoundError:
            pass
    return n


def _wait_kill_moment(mode: str, broker: Broker, consumer: GroupConsumer, rnd: random.Random,
                      max_wait: float) -> bool:
    """Block until the moment to kill in `mode`; False if it did not come in time (the
    kill then happens anyway, counted as random)."""
    time.sleep(rnd.uniform(0.3, 1.0))  # let traffic resume after the restart
    deadline = time.monotonic() + max_wait
    if mode == "random":
        time.sleep(rnd.uniform(0.0, 1.5))
        return True
    if mode == "roll":
        before = _segments(broker.data_dir)
        while time.monotonic() < deadline:
            if _segments(broker.data_dir) > before:
                return True
            time.sleep(0.002)
        return False
    if mode == "retention":
        tail = LogTail(broker.log_path)
        while time.monotonic() < deadline:
            if "Deleting segment" in tail.new_text():
                return True
            time.sleep(0.002)
        return False
    # commit: the consumer sets `committing` just before its synchronous commit
    consumer.committing.clear()
    return consumer.committing.wait(max_wait)


def run(cycles: int, fsync: bool, seed: int = 1, rate: float = 300.0,
        start_timeout: float = 30.0, reread_every: int = 25, data_dir: str | None = None,
        progress: bool = False) -> dict:
    rnd = random.Random(seed)
    own = data_dir is None
    data_dir = data_dir or tempfile.mkdtemp(prefix="kafkalite-crash-")
    settings = dict(BROKER_SETTINGS)
    settings["kafkalite.fsync.before.ack"] = "true" if fsync else "false"
    broker = Broker(data_dir=data_dir, settings=settings)
    result: dict = {"mode": "fsync.before.ack" if fsync else "page-cache", "cycles": 0,
                    "kills": dict.fromkeys(KILL_MODES, 0), "kill_moment_missed": 0}
    start_times: list[float] = []
    t_begin = time.monotonic()
    workers: list[ProducerWorker] = []
    consumer = None
    try:
        start_times.append(broker.start_measured(start_timeout))
        with Conn(broker.bootstrap) as c:
            create_topic(c, DATA, len(DATA_PARTS), DATA_CONFIGS)
            create_topic(c, CHURN, 1, CHURN_CONFIGS)
        data, churn = Model(DATA, DATA_PARTS), Model(CHURN, [0], retained=True)
        # batches under the segments' size, which a broker refuses (RECORD_LIST_TOO_LARGE):
        # records pile up while the broker is down and would otherwise go out as one batch
        small = {"batch.size": 8192}
        workers = [ProducerWorker(broker.bootstrap, DATA, DATA_PARTS, "a", rate, extra=small),
                   ProducerWorker(broker.bootstrap, DATA, DATA_PARTS, "b", rate, codec="lz4",
                                  extra=small),
                   ProducerWorker(broker.bootstrap, CHURN, [0], "c", rate / 2,
                                  extra={"batch.size": 4096})]
        consumer = GroupConsumer(broker.bootstrap, DATA, GROUP)
        for w in [*workers, consumer]:
            w.start()
        taken = [0] * len(workers)
        commits_seen: dict[int, int] = {}
        rewinds = 0

        def settle(conn: Conn) -> None:
            nonlocal rewinds
            for i, w in enumerate(workers):
                n = len(w.acked)
                (churn if w.topic == CHURN else data).add_acks(w.acked[taken[i]:n])
                taken[i] = n
            data.check(conn)
            churn.check(conn)
            acked_commits = dict(consumer.acked_commits)
            committed = offset_fetch(conn, GROUP, DATA, DATA_PARTS)
            ends = list_offsets(conn, DATA, DATA_PARTS, -1)
            for p in DATA_PARTS:
                floor = max(acked_commits.get(p, -1), commits_seen.get(p, -1))
                if committed[p] < floor:
                    rewinds += 1
                    data.violations.append(f"committed offset of {DATA}-{p} went back to "
                                           f"{committed[p]} (acknowledged {floor})")
                if committed[p] > ends[p]:
                    data.violations.append(f"committed offset {committed[p]} of {DATA}-{p} "
                                           f"is past the log end {ends[p]}")
                commits_seen[p] = max(commits_seen.get(p, -1), committed[p])

        for cycle in range(cycles):
            mode = KILL_MODES[cycle % len(KILL_MODES)]
            if not _wait_kill_moment(mode, broker, consumer, rnd, max_wait=5.0):
                result["kill_moment_missed"] += 1
            broker.kill()
            result["kills"][mode] += 1
            start_times.append(broker.start_measured(start_timeout))
            with Conn(broker.bootstrap, timeout=30.0) as c:
                settle(c)
                if reread_every and (cycle + 1) % reread_every == 0:
                    data.reread_all(c)
                    churn.reread_all(c)
            result["cycles"] = cycle + 1
            if progress:
                print(f"cycle {cycle + 1}/{cycles} ({mode}): {data.totals()} "
                      f"violations={len(data.violations) + len(churn.violations)}",
                      file=sys.stderr, flush=True)
            if data.violations or churn.violations:
                break
        for w in workers:
            w.finish()
        consumer.finish()
        with Conn(broker.bootstrap, timeout=30.0) as c:
            settle(c)
            data.reread_all(c)
            churn.reread_all(c)
        result.update({
            "data": data.totals(), "churn": churn.totals(),
            "committed_offset_rewinds": rewinds,
            "commits_acknowledged": consumer.commits_ok,
            "commits_failed": consumer.commits_failed,
            "records_consumed_by_group": consumer.consumed,
            "producer_fatal_errors": sum(w.stats.fatal for w in workers),
            "producer_delivery_failures": sum(w.stats.failed for w in workers),
            "producer_unflushed_at_end": sum(w.flush_left for w in workers),
            "start_s_max": round(max(start_times), 3),
            "start_s_median": round(sorted(start_times)[len(start_times) // 2], 3),
            "recovered_starts": broker.read_log().count("(recovered)"),
            "violations": (data.violations + churn.violations)[:20],
            "wall_s": round(time.monotonic() - t_begin, 1)})
        return result
    finally:
        for w in workers:
            w.stop_event.set()
        if consumer is not None:
            consumer.stop_event.set()
        broker.kill()
        if own:
            shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="SIGKILL the broker under load and verify.")
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--mode", choices=("page-cache", "fsync", "both"), default="both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=300.0, help="records/s per data producer")
    ap.add_argument("--start-timeout", type=float, default=30.0)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    modes = [False, True] if args.mode == "both" else [args.mode == "fsync"]
    results = []
    ok = True
    for fsync in modes:
        r = run(args.cycles, fsync, args.seed, args.rate, args.start_timeout, progress=True)
        results.append(r)
        ok = ok and not r["violations"] and r["data"]["lost"] == 0 \
            and r["data"]["duplicates"] == 0 and r["producer_fatal_errors"] == 0
    emit(results, args.json)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
