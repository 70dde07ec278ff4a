# The benchmark harness: `python -m benchmarks.run --spawn` (or --bootstrap 127.0.0.1:PORT).
#
# Order of a run: bare-interpreter startup floor; startup latency of fresh brokers (--spawn);
# the loopback TCP sink reference; then against one broker, for each record size, produce
# with acks=1 and acks=all into fresh 4-partition topics and consume the acks=1 data back;
# finally produce->consume latency at a fixed rate. Broker CPU and RSS are read from /proc
# around every test (when the harness spawned the broker or was given --broker-pid). The
# table goes to stdout, the JSON to benchmarks/results/. See benchmarks/README.md.
from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from . import compare

HERE = os.path.dirname(os.path.abspath(__file__))


def _loopback_only(bootstrap: str) -> str:
    for server in bootstrap.split(","):
        host = server.rsplit(":", 1)[0].strip("[]")
        if host == "localhost":
            continue
        try:
            if ipaddress.ip_address(host).is_loopback:
                continue
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(
            f"{server}: this harness only talks to loopback addresses (127.0.0.0/8, ::1)")
    return bootstrap


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run",
                                 description="kafkalite throughput/latency benchmark")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", type=_loopback_only, metavar="HOST:PORT",
                       help="a running broker on loopback")
    where.add_argument("--spawn", action="store_true",
                       help="start a kafkalite broker subprocess (free port, temp data dir)")
    ap.add_argument("--broker-rev", metavar="GIT-REV",
                    help="with --spawn: run kafkalite as committed at this revision (e.g. "
                         "HEAD), extracted to a temp dir, instead of the working tree")
    ap.add_argument("--broker-pid", type=int,
                    help="with --bootstrap: the broker's pid, for CPU/RSS accounting")
    ap.add_argument("--messages", type=int,
                    help="records per produce test for sizes < 1000 B (default 10,000,000; "
                         "4,000,000 with --reference)")
    ap.add_argument("--messages-large", type=int,
                    help="records per produce test for sizes >= 1000 B (default 2,000,000; "
                         "800,000 with --reference)")
    ap.add_argument("--sizes", default="100,1024", help="record value sizes in bytes")
    ap.add_argument("--acks", default="1,all", help="acks settings to produce with")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--parallel-consumers", type=int, default=2, metavar="N",
                    help="also read each consumed topic again with N consumer processes "
                         "(what the broker serves when one Python client is not the limit; "
                         "0 or 1 skips)")
    ap.add_argument("--keep-topics", action="store_true",
                    help="do not delete each test's topic once it is done with")
    ap.add_argument("--no-consume", action="store_true",
                    help="skip the consume tests (e.g. to profile produce alone)")
    ap.add_argument("--linger-ms", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=1_000_000)
    ap.add_argument("--latency-rate", type=int, default=1000, help="msg/s (0 skips)")
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--latency-acks", default="1")
    ap.add_argument("--phase-timeout", type=float, default=120.0,
                    help="upper bound in seconds for any one test")
    ap.add_argument("--startup-runs", type=int, default=3,
                    help="fresh brokers spawned just to time startup (with --spawn), after "
                         "one untimed start that warms the page cache and bytecode cache")
    ap.add_argument("--sink-mib", type=int, default=512,
                    help="MiB streamed into the TCP sink per reference run (0 skips)")
    ap.add_argument("--broker-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra setting for the spawned broker (repeatable)")
    ap.add_argument("--wait-for-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="before each test, wait up to this long for other processes on "
                         "the machine to use < 0.3 cores (shared machines; default off)")
    ap.add_argument("--profile", metavar="FILE",
                    help="record the broker with py-spy (raw collapsed stacks) during the "
                         "produce/consume/latency tests; summarise with "
                         "`python -m benchmarks.profile_summary FILE`")
    ap.add_argument("--cprofile", metavar="FILE",
                    help="run the spawned broker under cProfile (CPU-time clock) and write "
                         "pstats to FILE at its exit; slows the broker, so use the figures "
                         "only for attribution (`python -m benchmarks.profile_summary FILE`)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"),
                    help="directory for <timestamp>.json and latest.json")
    compare.add_arguments(ap)
    return ap


def environment() -> dict:
    import confluent_kafka
    ck_version = confluent_kafka.version()
    if isinstance(ck_version, tuple):
        ck_version = ck_version[0]
    try:
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "--", "kafkalite"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit += "+uncommitted" if dirty else ""
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    try:
        import uvloop  # noqa: F401
        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "confluent_kafka": ck_version,
            "librdkafka": confluent_kafka.libversion()[0], "kafkalite_commit": commit,
            "event_loop_available": loop}


def _start_profiler(pid: int, path: str) -> subprocess.Popen | None:
    exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(exe):
        print(f"py-spy not found next to {sys.executable}; not profiling", file=sys.stderr)
        return None
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--format", "raw",
                             "--rate", "200", "--nonblocking", "--output", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)


def _stop_profiler(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure_startup(runs: int, settings: dict[str, str], src: str | None) -> list:
    from .broker_proc import spawn_broker
    out = []
    for i in range(runs + 1):
        if QUIET_WAIT > 0 and i:
            from .broker_proc import wait_for_quiet
            wait_for_quiet(QUIET_WAIT)
        bp, st = spawn_broker(settings, src_dir=src)
        bp.cleanup()
        out.append(st)
    return out  # out[0] is the cold start


QUIET_WAIT = 0.0
DATA_DIR: str | None = None  # the spawned broker's, flushed before each test


def _ceiling(r: dict, count_key: str) -> None:
    """Records per broker CPU-second: the rate one fully available core would sustain if
    the broker stayed the only cost. Unlike msgs/s it barely moves when other processes
    compete for the CPUs (kernel work charged to other contexts is not in it)."""
    cpu = r.get("broker", {}).get("broker_cpu_s")
    if cpu:
        r["broker_bound_msgs_per_s"] = round(r[count_key] / cpu)
        r["broker_bound_mib_per_s"] = round(r[count_key] * r["size"] / cpu / 2**20, 1)
    ccpu = r.get("client_cpu_s")
    if ccpu:
        r["client_bound_msgs_per_s"] = round(r[count_key] / ccpu)


def _phase(mon, fn, *args, **kw) -> dict:
    from .broker_proc import measured_phase
    return measured_phase(mon, DATA_DIR, QUIET_WAIT, fn, *args, **kw)


def _topic(w, bootstrap: str, name: str, partitions: int, doc: dict) -> dict:
    t = w.create_topic(bootstrap, name, partitions)
    doc["topics"].append(t)
    if t["created_by"].startswith("CreateTopics failed"):
        doc["warnings"].append(f"{name}: {t['created_by']}")
    if t["partitions"] != partitions:
        doc["warnings"].append(f"{name} has {t['partitions']} partitions, not {partitions}")
    return t


def _drop(w, bootstrap: str, topic: str, args, doc: dict) -> None:
    if args.keep_topics:
        return
    err = w.delete_topic(bootstrap, topic)
    if err:
        doc["warnings"].append(f"could not delete {topic}: {err}")


def run_kafka_tests(args, bootstrap: str, mon, doc: dict) -> None:
    from . import workloads as w
    run_id = uuid.uuid4().hex[:8]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    acks_list = [a for a in args.acks.split(",") if a]
    doc["topics"] = []
    for size in sizes:
        count = args.messages if size < 1000 else args.messages_large
        consume_from = None
        for acks in acks_list:
            # Only the last topic of a size is kept (for the consume test): measured here, a
            # produce test that ran while an earlier 2 GB topic was still on disk cost the
            # broker ~3x the CPU, nearly all in the kernel, for the same work.
            if consume_from is not None:
                _drop(w, bootstrap, consume_from[0]["topic"], args, doc)
            t = _topic(w, bootstrap, f"bench-{run_id}-{size}b-acks{acks}", args.partitions, doc)
            r = _phase(mon, w.produce, bootstrap, t["topic"], size, acks, count,
                       args.phase_timeout, args.linger_ms, args.batch_size)
            stored = w.high_watermarks(bootstrap, t["topic"], t["partitions"])
            r["stored_per_high_watermarks"] = stored
            if stored != r["acked"]:
                doc["warnings"].append(f"{t['topic']}: {r['acked']} acked but the high "
                                       f"watermarks add up to {stored}")
            _ceiling(r, "acked")
            doc["produce"].append(r)
            _progress(f"produce {size} B acks={acks}", r)
            consume_from = (t, stored)
        if consume_from is not None and args.no_consume:
            _drop(w, bootstrap, consume_from[0]["topic"], args, doc)
            consume_from = None
        if consume_from is not None:
            t, stored = consume_from
            r = _phase(mon, w.consume, bootstrap, t["topic"], t["partitions"], size, stored,
                       args.phase_timeout)
            _ceiling(r, "received")
            doc["consume"].append(r)
            _progress(f"consume {size} B", r)
            if args.parallel_consumers > 1:
                per = w.partition_high_watermarks(bootstrap, t["topic"], t["partitions"])
                r = _phase(mon, w.consume_parallel, bootstrap, t["topic"], per, size,
                           args.parallel_consumers, args.phase_timeout)
                _ceiling(r, "received")
                doc["consume"].append(r)
                _progress(f"consume {size} B x{r['processes']} processes", r)
            _drop(w, bootstrap, t["topic"], args, doc)
    if args.latency_rate > 0:
        t = _topic(w, bootstrap, f"bench-{run_id}-latency", args.partitions, doc)
        doc["latency"] = _phase(mon, w.latency, bootstrap, t["topic"], t["partitions"],
                                args.latency_rate, args.latency_seconds,
                                acks=args.latency_acks, timeout=args.phase_timeout)
        r = doc["latency"]
        if r.get("broker") and r["received"]:
            # per record, which here means one Produce request plus the Fetch it answers
            r["broker_cpu_us_per_record"] = round(1e6 * r["broker"]["broker_cpu_s"]
                                                  / r["received"])
        _progress("latency", r)
        _drop(w, bootstrap, t["topic"], args, doc)


def _progress(label: str, r: dict) -> None:
    keys = ("msgs_per_s", "mib_per_s", "p50_ms", "p99_ms", "complete")
    print(f"  {label}: " + ", ".join(f"{k}={r[k]}" for k in keys if k in r),
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    compare.resolve_counts(args)
    global QUIET_WAIT, DATA_DIR
    QUIET_WAIT = args.wait_for_quiet
    from .broker_proc import (ProcessMonitor, export_revision, python_startup_s,
                              spawn_broker)
    from .report import render, write
    from .tcp_sink import measure as sink_measure

    started = dt.datetime.now(dt.timezone.utc)
    command = shlex.join([os.path.basename(sys.executable), "-m", "benchmarks.run",
                          *(sys.argv[1:] if argv is None else argv)])
    doc: dict = {"started_at": started.isoformat(timespec="seconds"), "command": command,
                 "cwd": os.getcwd(), "environment": environment(),
                 "parameters": vars(args).copy(), "warnings": [], "produce": [],
                 "consume": [], "loadavg_start": os.getloadavg()}
    settings = dict(kv.split("=", 1) for kv in args.broker_set)
    src = None
    if args.broker_rev:
        if not args.spawn:
            print("--broker-rev needs --spawn", file=sys.stderr)
            return 2
        src, sha = export_revision(os.path.dirname(HERE), args.broker_rev)
        doc["environment"]["kafkalite_commit"] = f"{sha[:10]} (--broker-rev {args.broker_rev})"
    if args.reference:
        try:
            return compare.main(args, doc, settings, src, f"{started:%Y%m%dT%H%M%SZ}")
        finally:
            if src:
                shutil.rmtree(src, ignore_errors=True)
    t_run = time.perf_counter()

    if args.spawn:
        print("timing broker startup...", file=sys.stderr, flush=True)
        floor = python_startup_s()
        runs = measure_startup(args.startup_runs, settings, src)
        cold, runs = runs[0], runs[1:]
    if args.sink_mib > 0:
        print("TCP sink reference...", file=sys.stderr, flush=True)
        doc["tcp_sink"] = [sink_measure(args.sink_mib * 2**20, chunk, args.phase_timeout)
                           for chunk in (1024, 65536)]

    broker = None
    pid = args.broker_pid
    if args.spawn:
        broker_log = os.path.join(tempfile.gettempdir(),
                                  f"kafkalite-bench-{started:%Y%m%dT%H%M%S}.log")
        doc["broker_log"] = broker_log
        broker, st = spawn_broker(settings, log_path=broker_log, src_dir=src,
                                  cprofile_out=args.cprofile)
        runs.append(st)
        pid = broker.proc.pid
        DATA_DIR = broker.data_dir
        bootstrap = broker.bootstrap
        doc["startup"] = {
            "metadata_s": [round(r.metadata_s, 4) for r in runs],
            "listening_s": [round(r.listening_s, 4) for r in runs],
            "metadata_s_median": round(statistics.median(r.metadata_s for r in runs), 4),
            "listening_s_median": round(statistics.median(r.listening_s for r in runs), 4),
            "cold_first_start_metadata_s": round(cold.metadata_s, 4),
            "python_floor_s": round(floor, 4)}
    else:
        bootstrap = args.bootstrap
    doc["target"] = f"kafkalite spawned at {bootstrap}" if args.spawn else bootstrap
    mon = ProcessMonitor(pid) if pid else None
    if mon is None:
        doc["warnings"].append("no broker pid: broker CPU and RSS not measured")
    prof = _start_profiler(pid, args.profile) if args.profile and pid else None
    try:
        run_kafka_tests(args, bootstrap, mon, doc)
    finally:
        _stop_profiler(prof)
        if mon is not None:
            try:
                doc["broker_totals"] = mon.totals()
            except OSError as e:
                doc["warnings"].append(f"broker accounting failed: {e}")
            mon.stop()
        if broker is not None:
            rc = broker.stop()
            log_text = broker.read_log()
            if rc not in (0, None):
                doc["warnings"].append(f"broker exited with {rc}")
            if "Traceback" in log_text or "ERROR" in log_text:
                doc["warnings"].append(f"the broker logged errors; see {broker_log}")
            broker.cleanup()
        if src:
            shutil.rmtree(src, ignore_errors=True)

    ratios = {}
    sink = {s["chunk_bytes"]: s["mib_per_s"] for s in doc.get("tcp_sink", [])}
    for r in doc["produce"] + doc["consume"]:
        if r["size"] >= 1000 and r["mib_per_s"]:
            procs = f" x{r['processes']} procs" if r.get("processes", 1) > 1 else ""
            label = (f"produce {r['size']} B acks={r['acks']}" if "acks" in r
                     else f"consume {r['size']} B{procs}")
            for chunk, mib in sink.items():
                ratios[f"{label} MiB/s / sink {chunk} B writes"] = round(r["mib_per_s"] / mib, 3)
    doc["ratios"] = ratios
    doc["wall_s"] = round(time.perf_counter() - t_run, 1)
    doc["loadavg_end"] = os.getloadavg()
    if args.profile:
        doc["profile"] = args.profile
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    paths = write(doc, args.out, stamp)
    print(render(doc))
    print(f"\nwall time {doc['wall_s']} s; JSON: {', '.join(paths)}")
    bad = [r for r in doc["produce"] + doc["consume"] if not r["complete"]]
    return 1 if bad or (doc.get("latency") and not doc["latency"]["complete"]) else 0


if __name__ == "__main__":
    sys.exit(main())
