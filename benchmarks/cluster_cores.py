# Several kafkalite brokers on one machine as the way to use several cores (issue 17): one
# kafkalite broker against a 3-broker kafkalite cluster on ZooKeeper (tests/helpers/
# zookeeper.py: the anchor's ZooKeeper 3.8.4, or Debian's), and Apache Kafka 3.8.0 single
# broker (benchmarks/kafka_ref.py) as the reference, in one run. Each gets an RF=1 topic of
# 6 partitions, which the cluster's controller spreads over its brokers (2 each); N
# confluent-kafka producer processes (acks=1, benchmarks/workloads.py's producer settings)
# write --records records between them, then N consumer processes read them back
# (workloads.consume_parallel). Reported per target: records/s and MiB/s over the span from
# the first process's start to the last one's end, and the brokers' CPU seconds (utime +
# stime from /proc, summed over the brokers) with the cores that makes; then the 3-broker /
# 1-broker ratios. Loopback only; every phase stops at its count or --phase-timeout.
#
#   .venv/bin/python -m benchmarks.cluster_cores [--records 300000] [--size 1024]
#       [--processes 3] [--linger-ms 10] [--batch-size 1000000] [--no-kafka]
#       [--rounds 3] [--wait-for-quiet 30] [--json FILE]
#
# Expect at most about the machine's core count as the ratio, and only while the broker is
# the bottleneck: the producers and consumers run on the same cores.
from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import uuid
from typing import Iterator

from . import workloads
from .broker_proc import cpu_seconds, machine_busy_seconds, wait_for_quiet

PARTITIONS = 6
SESSION_MS = "6000"


def _produce_child(*args) -> dict:
    try:
        r = workloads.produce(*args)
        r["t_end"] = time.perf_counter()
        return r
    except Exception as e:  # reported, not raised: one failed producer is a figure too
        return {"error": repr(e)}


def produce_parallel(bootstrap: str, topic: str, size: int, count: int, processes: int,
                     timeout: float, linger_ms: int, batch_size: int) -> dict:
    """`count` records from `processes` producer processes (acks=1), each its share; the
    rate is all acknowledged records over the span from the first start to the last end
    (the producers connect and learn the leaders before their own clock starts)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    shares = [count // processes + (k < count % processes) for k in range(processes)]
    # spawn: no fork of a process that runs librdkafka threads
    with ProcessPoolExecutor(processes, mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(_produce_child, bootstrap, topic, size, "1", n, timeout,
                               linger_ms, batch_size) for n in shares]
        results = [f.result(timeout=timeout + 60) for f in futures]
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r] + [e for r in ok for e in r["errors"]]
    acked = sum(r["acked"] for r in ok)
    # each child's clock starts after its connect (t_end - seconds): the span is the
    # producing itself, first start to last end (CLOCK_MONOTONIC, shared by processes)
    end = max((r["t_end"] for r in ok), default=time.perf_counter())
    start = min((r["t_end"] - r["seconds"] for r in ok), default=end)
    span = end - start
    return {"size": size, "processes": processes, "requested": count, "acked": acked,
            "seconds": round(span, 3), **workloads._rate(acked, size, span),
            "errors": errors, "complete": acked == count and not errors,
            "t_start": start, "t_end": end}


@contextlib.contextmanager
def kafkalite_cluster(brokers: int) -> Iterator[tuple[str, list[int]]]:
    """(bootstrap, broker pids): one kafkalite broker alone (brokers=1, no ZooKeeper: the
    single-node broker as users run it), or `brokers` on a ZooKeeper of their own."""
    from kafkalite.testing import BrokerProcess
    from tests.helpers.real_kafka import free_port_pair
    if brokers == 1:
        with BrokerProcess(port=free_port_pair()) as bp:
            yield bp.bootstrap, [bp.proc.pid]
        return
    from tests.helpers.zookeeper import ZooKeeperProcess, chroot_connect, unavailable_reason
    if (reason := unavailable_reason()) is not None:
        raise SystemExit(f"cannot run the cluster: {reason}")
    zk = ZooKeeperProcess()
    procs: list = []
    try:
        zk.start(timeout=60)
        connect = chroot_connect(zk.connect)
        for i in range(1, brokers + 1):
            procs.append(BrokerProcess(port=free_port_pair(), settings={
                "node.id": str(i), "zookeeper.connect": connect,
                "zookeeper.session.timeout.ms": SESSION_MS}))
            procs[-1].start()
        yield ",".join(b.bootstrap for b in procs), [b.proc.pid for b in procs]
    finally:
        for b in procs:
            b.stop()
            b.cleanup()
        zk.stop()
        zk.cleanup()


@contextlib.contextmanager
def kafka_single() -> Iterator[tuple[str, list[int]]]:
    from .kafka_ref import KafkaReference, find_java
    ref = KafkaReference()
    try:
        ref.start()
        yield ref.bootstrap, [ref.pid or find_java(ref.proc.pid) or ref.proc.pid]
    finally:
        ref.cleanup()


def leaders(bootstrap: str, topic: str, timeout: float = 60.0) -> dict[int, int]:
    """partition -> leader once every partition has one (bounded)."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        found = {p: m.leader for p, m in (md.partitions.items() if md else ())}
        if len(found) == PARTITIONS and all(v >= 0 for v in found.values()):
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: partitions without a leader: {found}")
        time.sleep(0.2)


def cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(p) for p in pids)


class CpuSampler:
    """The brokers' CPU seconds (summed) and the whole machine's busy seconds, sampled
    every `interval` s on the perf_counter clock (CLOCK_MONOTONIC, which the client
    processes' marks share), so that a phase's CPU is read over exactly its span and not
    over the client processes' start-up."""

    def __init__(self, pids: list[int], interval: float = 0.02):
        self.pids = pids
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        self.samples.append((time.perf_counter(), cpu(self.pids), machine_busy_seconds()))

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _at(self, t: float) -> tuple[float, float]:
        """(broker CPU, machine busy) at time t, interpolated between samples."""
        samples = list(self.samples)
        before = max((x for x in samples if x[0] <= t), default=samples[0])
        after = min((x for x in samples if x[0] >= t), default=samples[-1])
        if after[0] == before[0]:
            return before[1], before[2]
        f = (t - before[0]) / (after[0] - before[0])
        return (before[1] + f * (after[1] - before[1]), before[2] + f * (after[2] - before[2]))

    def over(self, start: float, end: float) -> dict:
        (c0, m0), (c1, m1) = self._at(start), self._at(end)
        span = max(end - start, 1e-9)
        return {"broker_cpu_s": round(c1 - c0, 2), "broker_cores": round((c1 - c0) / span, 2),
                "machine_busy_cores": round((m1 - m0) / span, 2)}


def measure(name: str, bootstrap: str, pids: list[int], args) -> dict:
    """One round against one target: a fresh topic, produce then consume."""
    topic = f"cores-{uuid.uuid4().hex[:8]}"
    workloads.create_topic(bootstrap, topic, PARTITIONS)
    out: dict = {"leaders": leaders(bootstrap, topic),
                 "quiet": wait_for_quiet(args.wait_for_quiet)}
    sampler = CpuSampler(pids)
    try:
        p = produce_parallel(bootstrap, topic, args.size, args.records, args.processes,
                             args.phase_timeout, args.linger_ms, args.batch_size)
        p.update(sampler.over(p.pop("t_start"), p.pop("t_end")))
        out["produce"] = p
        per_partition = workloads.partition_high_watermarks(bootstrap, topic, PARTITIONS)
        c = workloads.consume_parallel(bootstrap, topic, per_partition, args.size,
                                       args.processes, args.phase_timeout)
        end = time.perf_counter()  # the last consumer ended just before the call returned
        c.update(sampler.over(end - c["seconds"], end))
        out["consume"] = c
    finally:
        sampler.stop()
    workloads.delete_topic(bootstrap, topic)
    for phase in ("produce", "consume"):
        r = out[phase]
        print(f"  {name:<22} {phase:<8} {r['msgs_per_s'] or 0:>9,} rec/s "
              f"{r['mib_per_s'] or 0:>7} MiB/s  broker CPU {r['broker_cpu_s']:>5} s "
              f"({r['broker_cores']} cores; machine {r['machine_busy_cores']}, others "
              f"{out['quiet']['others_cores']} before){'' if r['complete'] else ' INCOMPLETE'}",
              flush=True)
    return out


def median_round(rounds: list[dict], phase: str) -> dict:
    ranked = sorted(rounds, key=lambda r: r[phase]["msgs_per_s"] or 0)
    return ranked[len(ranked) // 2][phase]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cluster_cores")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--processes", type=int, default=3, help="producer and consumer processes")
    ap.add_argument("--linger-ms", type=int, default=10, help="producers' linger.ms")
    ap.add_argument("--batch-size", type=int, default=1_000_000,
                    help="producers' batch.size: small batches make the broker the bottleneck "
                         "(per-request work), large ones the clients")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds, the targets taking turns in each; medians are reported")
    ap.add_argument("--phase-timeout", type=float, default=120.0)
    ap.add_argument("--no-kafka", action="store_true", help="leave out Apache Kafka 3.8")
    ap.add_argument("--wait-for-quiet", type=float, default=30.0, metavar="S",
                    help="before each measurement, wait up to S s for the rest of this "
                         "(shared) machine to go under 0.3 cores")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    print(f"{args.records:,} records of {args.size} B, RF=1 topic of {PARTITIONS} partitions, "
          f"{args.processes} producer (acks=1, linger.ms={args.linger_ms}, batch.size="
          f"{args.batch_size}) then {args.processes} consumer processes; {args.rounds} rounds")
    with contextlib.ExitStack() as stack:
        # every target up for the whole run, so that the rounds interleave them and a
        # neighbour's burst on this shared machine hits them alike; idle brokers cost ~0
        targets = {"kafkalite 1 broker": stack.enter_context(kafkalite_cluster(1)),
                   "kafkalite 3 brokers": stack.enter_context(kafkalite_cluster(3))}
        if not args.no_kafka:
            from .kafka_ref import unavailable_reason
            reason = unavailable_reason()
            if reason is None:
                targets["kafka 3.8.0 1 broker"] = stack.enter_context(kafka_single())
            else:
                print(f"  kafka 3.8.0: skipped ({reason})")
        rounds: dict[str, list[dict]] = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, (bootstrap, pids) in targets.items():
                rounds[name].append(measure(name, bootstrap, pids, args))
    medians = {name: {phase: median_round(rs, phase) for phase in ("produce", "consume")}
               for name, rs in rounds.items()}
    print("\nmedian of the rounds: records/s, MiB/s, broker CPU s (cores over the phase)")
    for name, m in medians.items():
        print(f"  {name:<22} " + "   ".join(
            f"{phase} {m[phase]['msgs_per_s'] or 0:>9,} {m[phase]['mib_per_s'] or 0:>6} "
            f"{m[phase]['broker_cpu_s']:>5} ({m[phase]['broker_cores']})"
            for phase in ("produce", "consume")))
    one, three = medians["kafkalite 1 broker"], medians["kafkalite 3 brokers"]
    ratios = {phase: round(three[phase]["msgs_per_s"] / one[phase]["msgs_per_s"], 2)
              for phase in ("produce", "consume")
              if one[phase]["msgs_per_s"] and three[phase]["msgs_per_s"]}
    print("3 brokers / 1 broker: " + ", ".join(f"{k} x{v}" for k, v in ratios.items()))
    per_broker: dict[int, int] = {}
    for leader in rounds["kafkalite 3 brokers"][0]["leaders"].values():
        per_broker[leader] = per_broker.get(leader, 0) + 1
    print(f"3-broker placement (leader: partitions): {dict(sorted(per_broker.items()))}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds, "medians": medians,
                       "ratios": ratios}, f, indent=1)
    return 0 if all(r[p]["complete"] for rs in rounds.values() for r in rs
                    for p in ("produce", "consume")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
