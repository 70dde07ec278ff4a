# kafkalite against Apache Kafka 3.8.0, side by side: `python -m benchmarks.run --spawn
# --reference kafka [--rounds N] [--quick]`.
#
# Both brokers are started once and stay up for the whole run (so Kafka's JIT keeps what it
# learnt). Each gets one warm-up round first, at --warmup-scale of the counts and not
# counted: measured here, a cold Kafka lost every figure to kafkalite, a warm one did not.
# Then the measured rounds alternate, kafkalite round, Kafka round, ..., so that drift in
# the shared machine's load falls on both alike. A round is the same workloads with the same
# client (confluent-kafka) on fresh 4-partition topics; the report gives per figure the
# median over rounds of each target, the ratio kafkalite/Kafka, which direction is better,
# and the spread (min-max) across rounds, of each target and of the per-round ratio.
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

from .broker_proc import ProcessMonitor, measured_phase, spawn_broker

QUICK = {"messages": 200_000, "messages_large": 40_000, "latency_seconds": 2.0,
         "sync_produce": 300, "startup_runs": 1, "sink_mib": 0, "parallel_consumers": 0}
REFERENCE_COUNTS = {"messages": 4_000_000, "messages_large": 800_000}
PLAIN_COUNTS = {"messages": 10_000_000, "messages_large": 2_000_000}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--reference", choices=["kafka"],
                    help="with --spawn: also start Apache Kafka 3.8.0 from the anchor "
                         "(KAFKA_ANCHOR_DIR, ../shared/anchors/kafka-3.8.0) and run the same "
                         "workloads against both, warmed, in alternating rounds")
    ap.add_argument("--rounds", type=int, default=2,
                    help="with --reference: measured rounds per broker (default 2, min 2)")
    ap.add_argument("--warmup-scale", type=float, default=0.5,
                    help="with --reference: the uncounted warm-up round's share of the counts")
    ap.add_argument("--sync-produce", type=int, default=2000, metavar="N",
                    help="with --reference: records produced one at a time, each awaited")
    ap.add_argument("--kafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra server.properties line for the reference Kafka (repeatable)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke-test sizes (well under 2 minutes, also with --reference): "
                         + ", ".join(f"{k}={v}" for k, v in QUICK.items()))


def resolve_counts(args: argparse.Namespace) -> None:
    """Fill in the counts the user did not give: --quick wins, then the reference run's
    smaller defaults (it runs (rounds+1) x 2 rounds), then a plain run's."""
    for key, val in {**PLAIN_COUNTS, **(REFERENCE_COUNTS if args.reference else {}),
                     **(QUICK if args.quick else {})}.items():
        if args.quick or getattr(args, key) is None:
            setattr(args, key, val)


class Target:
    def __init__(self, name: str, handle, pid: int, startup_s: float):
        self.name, self.handle, self.pid = name, handle, pid
        self.bootstrap = handle.bootstrap
        self.data_dir = handle.data_dir
        self.mon = ProcessMonitor(pid)
        self.doc: dict = {"bootstrap": self.bootstrap, "pid": pid, "log": handle.log_path,
                          "startup_metadata_s": round(startup_s, 4), "warmup": None,
                          "rounds": [], "topics": [], "warnings": []}


def run_round(t: Target, args: argparse.Namespace, scale: float) -> dict:
    """One pass of every workload against `t`; returns figure name -> result."""
    from . import workloads as w
    from .run import _ceiling, _drop, _topic
    rid = uuid.uuid4().hex[:8]
    figs: dict[str, dict] = {}

    def phase(fn, *a, **kw) -> dict:
        return measured_phase(t.mon, t.data_dir, args.wait_for_quiet, fn, *a, **kw)

    for size in [int(s) for s in args.sizes.split(",") if s]:
        count = max(1000, int((args.messages if size < 1000 else args.messages_large) * scale))
        kept = None
        for acks in [a for a in args.acks.split(",") if a]:
            if kept:
                _drop(w, t.bootstrap, kept[0]["topic"], args, t.doc)
            top = _topic(w, t.bootstrap, f"bench-{rid}-{size}b-acks{acks}", args.partitions,
                         t.doc)
            r = phase(w.produce, t.bootstrap, top["topic"], size, acks, count,
                      args.phase_timeout, args.linger_ms, args.batch_size)
            stored = r["stored_per_high_watermarks"] = w.high_watermarks(
                t.bootstrap, top["topic"], top["partitions"])
            if stored != r["acked"]:
                t.doc["warnings"].append(f"{top['topic']}: {r['acked']} acked, {stored} stored")
            _ceiling(r, "acked")
            figs[f"produce {size} B acks={acks}"] = r
            kept = (top, stored)
        if kept and not args.no_consume:
            top, stored = kept
            for group in (False, True):
                r = phase(w.consume, t.bootstrap, top["topic"], top["partitions"], size, stored,
                          args.phase_timeout, group=group)
                _ceiling(r, "received")
                figs[f"consume {size} B" + (" group" if group else "")] = r
        if kept:
            _drop(w, t.bootstrap, kept[0]["topic"], args, t.doc)
    if args.latency_rate > 0:
        top = _topic(w, t.bootstrap, f"bench-{rid}-latency", args.partitions, t.doc)
        figs["latency"] = phase(w.latency, t.bootstrap, top["topic"], top["partitions"],
                                args.latency_rate, max(1.0, args.latency_seconds * scale),
                                acks=args.latency_acks, timeout=args.phase_timeout)
        figs["sync produce"] = phase(w.sync_produce, t.bootstrap, top["topic"],
                                     max(100, int(args.sync_produce * scale)),
                                     acks=args.latency_acks, timeout=args.phase_timeout)
        _drop(w, t.bootstrap, top["topic"], args, t.doc)
    return figs


def headlines(figs: dict[str, dict]) -> dict[str, tuple[float | None, str, bool]]:
    """figure -> (value, unit, higher is better), the numbers the comparison is made of."""
    out: dict[str, tuple[float | None, str, bool]] = {}
    for key, r in figs.items():
        if key.startswith(("produce ", "consume ")):
            small = r["size"] < 1000
            out[key] = (r["msgs_per_s"] if small else r["mib_per_s"],
                        "msgs/s" if small else "MiB/s", True)
    for key, label in (("latency", "produce->consume"), ("sync produce", "sync produce")):
        if key in figs:
            for q in ("p50", "p99"):
                out[f"{label} {q}"] = (figs[key][f"{q}_ms"], "ms", False)
    cpu = [r["broker"]["broker_cpu_s"] for r in figs.values() if r.get("broker")]
    if cpu:
        out["broker CPU per round"] = (round(sum(cpu), 2), "CPU s", False)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def comparison(kl: dict, ka: dict) -> list[dict]:
    """One row per figure: median, min and max over rounds of each target, the ratio of the
    medians kafkalite/Kafka and the range of the per-round ratios (round i against round i)."""
    rows = []
    per_kl = [headlines(r) for r in kl["rounds"]]
    per_ka = [headlines(r) for r in ka["rounds"]]
    for name, (_v, unit, higher) in per_kl[0].items():
        a = [h[name][0] for h in per_kl if h.get(name, (None,))[0] is not None]
        b = [h[name][0] for h in per_ka if h.get(name, (None,))[0] is not None]
        row = {"figure": name, "unit": unit, "better": "higher" if higher else "lower",
               "kafkalite": statistics.median(a) if a else None,
               "kafka": statistics.median(b) if b else None,
               "kafkalite_range": [min(a), max(a)] if a else None,
               "kafka_range": [min(b), max(b)] if b else None}
        row["ratio"] = _ratio(row["kafkalite"], row["kafka"])
        paired = [_ratio(x, y) for x, y in zip(a, b)]
        paired = [p for p in paired if p is not None]
        row["ratio_range"] = [min(paired), max(paired)] if paired else None
        rows.append(row)
    for name, key, unit in (("startup to first Metadata", "startup_metadata_s", "s"),
                            ("broker peak RSS (VmHWM)", "rss_mib_vmhwm", "MiB")):
        x, y = kl.get(key), ka.get(key)
        rows.append({"figure": name, "unit": unit, "better": "lower", "kafkalite": x,
                     "kafka": y, "ratio": _ratio(x, y), "kafkalite_range": None,
                     "kafka_range": None, "ratio_range": None})
    return rows


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _start_targets(args, settings: dict, src: str | None, doc: dict) -> list[Target]:
    from .kafka_ref import KafkaReference
    from .run import measure_startup
    targets = []
    _say("starting kafkalite...")
    extra = [s.metadata_s for s in measure_startup(args.startup_runs, settings, src)[1:]] \
        if args.startup_runs > 0 else []
    bp, st = spawn_broker(settings, src_dir=src)
    try:
        targets.append(Target("kafkalite", bp, bp.proc.pid,
                              statistics.median(extra + [st.metadata_s])))
        _say("starting Apache Kafka 3.8.0 (up to 90 s)...")
        ref = KafkaReference(dict(kv.split("=", 1) for kv in args.kafka_set))
        try:
            kst = ref.start()
        except Exception:
            ref.cleanup()
            raise
        targets.append(Target("kafka", ref, ref.pid, kst.metadata_s))
        targets[1].doc["startup_note"] = "includes serve.sh formatting the empty data dir"
        targets[1].doc["heap"] = "serve.sh default KAFKA_HEAP_OPTS (-Xmx512m -Xms512m)"
    except Exception:
        for t in targets:
            _stop(t, doc)
        if not targets:
            bp.cleanup()
        raise
    return targets


def _stop(t: Target, doc: dict) -> None:
    try:
        tot = t.mon.totals()
        t.doc["rss_mib_vmhwm"] = tot["broker_rss_mib_peak_vmhwm"]
        t.doc["totals"] = tot
    except OSError as e:
        doc["warnings"].append(f"{t.name}: accounting failed: {e}")
    t.mon.stop()
    rc = t.handle.stop()
    t.doc["exit_code"] = rc
    t.handle.cleanup()


def main(args: argparse.Namespace, doc: dict, settings: dict, src: str | None,
         stamp: str) -> int:
    """Run the comparison and fill `doc`; returns the exit code (1 if a figure is
    incomplete, 3 if the reference cannot run here)."""
    from .kafka_ref import unavailable_reason
    from .report import render_comparison, write
    reason = unavailable_reason()
    if reason:
        print(f"--reference kafka skipped: {reason}", file=sys.stderr)
        return 3
    if not args.spawn:
        print("--reference needs --spawn (both brokers are started by the harness)",
              file=sys.stderr)
        return 2
    rounds = max(2, args.rounds)
    t_run = time.perf_counter()
    targets = _start_targets(args, settings, src, doc)
    try:
        for t in targets:
            _say(f"warm-up round on {t.name} (x{args.warmup_scale} counts, not counted)...")
            t.doc["warmup"] = run_round(t, args, args.warmup_scale)
        for i in range(rounds):
            for t in targets:
                _say(f"round {i + 1}/{rounds} on {t.name}...")
                t.doc["rounds"].append(run_round(t, args, 1.0))
    finally:
        for t in targets:
            _stop(t, doc)
    doc["reference"] = "Apache Kafka 3.8.0 (anchor serve.sh, KRaft single node)"
    doc["targets"] = {t.name: t.doc for t in targets}
    doc["comparison"] = comparison(targets[0].doc, targets[1].doc)
    doc["wall_s"] = round(time.perf_counter() - t_run, 1)
    doc["loadavg_end"] = os.getloadavg()
    paths = write(doc, args.out, stamp)
    print(render_comparison(doc))
    print(f"\nwall time {doc['wall_s']} s; JSON: {', '.join(paths)}")
    bad = [f"{t.name} {k}" for t in targets for r in t.doc["rounds"] for k, v in r.items()
           if not v.get("complete", True)]
    for b in bad:
        print(f"INCOMPLETE: {b}", file=sys.stderr)
    return 1 if bad else 0
