# Turning a finished run into the human table and the JSON document.
#
# The "bar" is what the project's issue quotes for Apache Kafka 3.8 on the same kind of
# 2-core machine with the same client; it is printed beside each figure so a reader sees the
# gap without looking it up. It is a quoted reference, not something this harness measured.
from __future__ import annotations

import json
import os

BAR = {
    "produce_100_msgs_per_s": (1_200_000, 1_500_000),
    "produce_1024_mib_per_s": (450, 750),
    "consume_100_msgs_per_s": (1_800_000, 2_000_000),
    "startup_metadata_s_max": 0.5,
    "broker_rss_mib_max": 100,
}


def _n(x, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def _bar_note(kind: str, size: int, r: dict) -> str:
    if not r.get("msgs_per_s"):
        return ""
    key = f"{kind}_{size}_msgs_per_s"
    if key in BAR:
        lo, hi = BAR[key]
        return f"Kafka {lo / 1e6:.1f}-{hi / 1e6:.1f} M msgs/s ({r['msgs_per_s'] / lo:.2f}x low end)"
    key = f"{kind}_{size}_mib_per_s"
    if key in BAR:
        lo, hi = BAR[key]
        return f"Kafka {lo}-{hi} MB/s ({r['mib_per_s'] / lo:.2f}x low end)"
    return ""


def _row(label: str, r: dict, count_key: str, note: str) -> str:
    flag = "" if r.get("complete", True) else " INCOMPLETE"
    b = r.get("broker", {})
    cpu = "-"
    if b:
        total = b.get("broker_cpu_s") or 0
        sys_share = 100 * b.get("broker_cpu_sys_s", 0) / total if total else 0
        cpu = (f"{_n(total, 2)} s {_n(b.get('broker_cpu_pct_of_core'))}% "
               f"sys{sys_share:3.0f}%")
    rss = _n(b.get("broker_rss_mib_peak_sampled"), 0) if b else "-"
    others = _n(b.get("other_processes_cores"), 2) if b else "-"
    return (f"{label:<24}{_n(r.get(count_key)):>11}{_n(r.get('seconds'), 2):>8}"
            f"{_n(r.get('msgs_per_s')):>11}{_n(r.get('mib_per_s'), 1):>9}{cpu:>22}"
            f"{_n(r.get('broker_bound_msgs_per_s')):>12}{_n(r.get('client_bound_msgs_per_s')):>12}"
            f"{rss:>6}{others:>7}  {note}{flag}")


def render(doc: dict) -> str:
    env = doc["environment"]
    lines = [f"kafkalite benchmark  {doc['started_at']}  target {doc['target']}",
             f"command: {doc['command']}",
             f"librdkafka {env['librdkafka']}, confluent-kafka {env['confluent_kafka']}, "
             f"Python {env['python']}, {env['cpus']} CPUs, kafkalite {env['kafkalite_commit']}",
             "load average (1/5/15 min) at start "
             + "/".join(f"{x:.2f}" for x in doc.get("loadavg_start", ()))
             + ", at end " + "/".join(f"{x:.2f}" for x in doc.get("loadavg_end", ())),
             ""]
    st = doc.get("startup")
    if st:
        runs = " ".join(f"{x:.3f}" for x in st["metadata_s"])
        ok = "meets" if st["metadata_s_median"] < BAR["startup_metadata_s_max"] else "misses"
        lines.append(f"Startup, spawn -> first Metadata answer: median {st['metadata_s_median']:.3f}"
                     f" s (runs {runs}); listening after {st['listening_s_median']:.3f} s; "
                     f"cold first start {st['cold_first_start_metadata_s']:.3f} s; "
                     f"bare `python -c pass` {st['python_floor_s']:.3f} s  "
                     f"[bar < {BAR['startup_metadata_s_max']} s: {ok}]")
        lines.append("")
    head = (f"{'test':<24}{'records':>11}{'secs':>8}{'msgs/s':>11}{'MiB/s':>9}"
            f"{'broker CPU':>22}{'msgs/brk-s':>12}{'msgs/cli-s':>12}{'RSS':>6}{'others':>7}"
            "  vs Apache Kafka bar")
    lines += [head, "-" * len(head)]
    for r in doc.get("produce", []):
        lines.append(_row(f"produce {r['size']} B acks={r['acks']}", r, "acked",
                          _bar_note("produce", r["size"], r)))
    for r in doc.get("consume", []):
        procs = f" x{r['processes']} procs" if r.get("processes", 1) > 1 else ""
        lines.append(_row(f"consume {r['size']} B{procs}", r, "received",
                          _bar_note("consume", r["size"], r)))
    lines.append("(broker CPU = user+sys seconds, % of one core during the test, and the "
                 "share spent in the kernel (sys); "
                 "msgs/brk-s and msgs/cli-s = records per CPU-second of the broker and of "
                 "this client process, i.e. the rate each could sustain on a whole core; "
                 "RSS = broker peak MiB during the test; others = cores busy with unrelated "
                 "processes meanwhile: high means the figures measured contention)")
    lat = doc.get("latency")
    if lat:
        flag = "" if lat["complete"] else "  INCOMPLETE"
        lines += ["", f"Latency produce->consume, {lat['size']} B acks={lat['acks']}, "
                  f"{lat['rate_per_s']} msg/s for {lat['seconds']} s "
                  f"(achieved {lat['achieved_send_rate']}/s, {lat['received']}/{lat['sent']} "
                  f"received): p50 {lat['p50_ms']} ms  p90 {lat['p90_ms']} ms  "
                  f"p99 {lat['p99_ms']} ms  p99.9 {lat['p999_ms']} ms  max {lat['max_ms']} ms"
                  f"{flag}"]
        if lat.get("broker"):
            lines.append(f"  broker CPU during it: {lat['broker']['broker_cpu_s']} s "
                         f"({lat['broker']['broker_cpu_pct_of_core']}% of a core, "
                         f"{lat.get('broker_cpu_us_per_record')} us per record, i.e. per "
                         f"Produce request plus the Fetch that returns it); others "
                         f"{lat['broker'].get('other_processes_cores')} cores")
    sink = doc.get("tcp_sink")
    if sink:
        lines += ["", "Physical reference, trivial asyncio TCP sink on loopback (same run):"]
        for s in sink:
            lines.append(f"  {s['chunk_bytes']:>6} B writes: {s['mib_per_s']:,.1f} MiB/s "
                         f"(sink at {s['sink_cpu_pct_of_core']}% of a core)")
        for name, ratio in doc.get("ratios", {}).items():
            lines.append(f"  {name}: {ratio:.3f}")
    tot = doc.get("broker_totals")
    if tot:
        ok = "meets" if tot["broker_rss_mib_peak_vmhwm"] < BAR["broker_rss_mib_max"] else "misses"
        lines += ["", f"Broker over the whole run: CPU {tot['broker_cpu_s_total']} s user+sys "
                  f"({tot['broker_cpu_s_since_exec']} s since exec), peak RSS (VmHWM) "
                  f"{tot['broker_rss_mib_peak_vmhwm']} MiB, RSS at end "
                  f"{tot['broker_rss_mib_end']} MiB  [bar < {BAR['broker_rss_mib_max']} MiB: "
                  f"{ok}]"]
    for w in doc.get("warnings", []):
        lines.append(f"WARNING: {w}")
    return "\n".join(lines)


def write(doc: dict, out_dir: str, stamp: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, f"{stamp}.json"), os.path.join(out_dir, "latest.json")]
    for path in paths:
        with open(path, "w") as f:
            json.dump(doc, f, indent=2, sort_keys=False)
            f.write("\n")
    return paths


def _span(rng: list | None, digits: int) -> str:
    return f"{_n(rng[0], digits)}-{_n(rng[1], digits)}" if rng else ""


def render_comparison(doc: dict) -> str:
    """The side-by-side table of a --reference run: medians over the measured rounds."""
    env = doc["environment"]
    ka = doc["targets"]["kafka"]
    rounds = len(doc["targets"]["kafkalite"]["rounds"])
    lines = [f"kafkalite vs {doc['reference']}  {doc['started_at']}",
             f"command: {doc['command']}",
             f"librdkafka {env['librdkafka']}, confluent-kafka {env['confluent_kafka']}, "
             f"Python {env['python']}, {env['cpus']} CPUs, kafkalite {env['kafkalite_commit']}",
             f"{rounds} measured rounds per broker, alternating, after one uncounted warm-up "
             f"round each; load average at start "
             + "/".join(f"{x:.2f}" for x in doc.get("loadavg_start", ()))
             + ", at end " + "/".join(f"{x:.2f}" for x in doc.get("loadavg_end", ())), ""]
    head = (f"{'figure':<30}{'unit':>8}{'kafkalite':>12}{'Kafka':>12}{'ratio':>8}"
            f"{'better':>8}  {'kafkalite range':>20}{'Kafka range':>20}{'ratio range':>14}")
    lines += [head, "-" * len(head)]
    for r in doc["comparison"]:
        d = 1 if r["unit"] in ("MiB/s", "CPU s", "MiB") else 3 if r["unit"] in ("ms", "s") else 0
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        ahead = ""
        if r["ratio"] is not None and r["ratio"] != 1:
            ahead = " +" if (r["ratio"] > 1) == (r["better"] == "higher") else " -"
        lines.append(f"{r['figure']:<30}{r['unit']:>8}{_n(r['kafkalite'], d):>12}"
                     f"{_n(r['kafka'], d):>12}{ratio:>8}{r['better']:>8}{ahead:2}"
                     f"{_span(r['kafkalite_range'], d):>18}{_span(r['kafka_range'], d):>20}"
                     f"{_span(r['ratio_range'], 2):>14}")
    lines.append("(ratio = kafkalite / Kafka of the medians; 'better' says which direction "
                 "favours a broker, + marks kafkalite ahead, - behind; ranges are min-max over "
                 "the rounds, the ratio range pairs round i of each. Kafka's startup includes "
                 f"serve.sh formatting its data dir; its heap: {ka.get('heap')})")
    for name, t in doc["targets"].items():
        others = [r["broker"]["other_processes_cores"] for rnd in t["rounds"]
                  for r in rnd.values() if r.get("broker")]
        if others:
            lines.append(f"{name}: unrelated processes used up to {max(others):.2f} cores "
                         "during its tests (high means contention, not the broker)")
        for w in t["warnings"]:
            lines.append(f"WARNING ({name}): {w}")
    for w in doc.get("warnings", []):
        lines.append(f"WARNING: {w}")
    return "\n".join(lines)
