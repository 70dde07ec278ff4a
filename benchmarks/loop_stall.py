# How long the broker's event loop stalls while segments roll under produce load.
#
#   python -m benchmarks.loop_stall [--broker-rev REV] [--seconds 20] [--rate-mib 60]
#                                   [--segment-mib 64] [--topic-partitions 500]
#                                   [--topic-rounds 3] [--only-topics]
#
# A spawned broker with a small log.segment.bytes takes 1 KiB acks=1 records at a steady
# --rate-mib from a confluent-kafka producer in a child process (so that the producer's
# Python loop does not hold this process's GIL), while this process sends one tiny request
# (ApiVersions v0) at a time on its own connection, every --interval-ms, and times each
# round trip. Every connection shares the one event loop, so a probe's round trip is at
# least as long as any stall the loop had while the probe waited: the maximum is the figure
# the issue asks for, p99 shows whether stalls are rare or routine.
#
# The rate is steady and moderate on purpose: at full speed (a few GB of dirty page cache)
# the probes measured 300-800 ms stalls even with 1 GiB segments, i.e. without any roll
# (the kernel throttles writers once dirty pages pile up), which would hide what the rolls
# cost. The default run writes about 1.2 GB. Bounded by --seconds; all traffic on
# 127.0.0.1.
#
# A first phase (skipped with --topic-rounds 0) probes the same way while an admin client
# creates and deletes a topic of --topic-partitions partitions, --topic-rounds times: the
# partitions' files, the metadata file's fsyncs and the deletion's renames are the stalls
# it shows if they run on the loop.
from __future__ import annotations

import argparse
import glob
import multiprocessing
import os
import shlex
import socket
import statistics
import struct
import sys
import threading
import time

from .broker_proc import _recv_exact, export_revision, spawn_broker

TOPIC = "loop-stall"


def api_versions_request(correlation_id: int) -> bytes:
    client_id = b"loop-stall"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def probe(host: str, port: int, seconds: float, interval_s: float, stop) -> list[float]:
    """Round-trip times in ms of sequential ApiVersions requests until `stop` is set or
    `seconds` pass."""
    rtts: list[float] = []
    with socket.create_connection((host, port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.perf_counter() + seconds
        corr = 0
        while time.perf_counter() < deadline and not stop.is_set():
            corr += 1
            t0 = time.perf_counter()
            s.sendall(api_versions_request(corr))
            (size,) = struct.unpack(">i", _recv_exact(s, 4))
            _recv_exact(s, size)
            rtts.append((time.perf_counter() - t0) * 1000)
            time.sleep(interval_s)
    return rtts


def _load(bootstrap: str, rate_mib: float, seconds: float, q) -> None:
    """1 KiB acks=1 records at `rate_mib` MiB/s for `seconds`, in 10 ms ticks."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "batch.size": 1_000_000, "compression.type": "none",
                  "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000})
    p.list_topics(TOPIC, timeout=10)
    payload = os.urandom(1024)
    per_tick = max(1, int(rate_mib * 1024 / 100))
    sent = 0
    t0 = time.perf_counter()
    tick = t0
    while tick - t0 < seconds:
        for _ in range(per_tick):
            try:
                p.produce(TOPIC, payload)
                sent += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        tick += 0.01
        time.sleep(max(0.0, tick - time.perf_counter()))
    unacked = p.flush(30)
    elapsed = time.perf_counter() - t0
    q.put({"acked": sent - unacked, "seconds": round(elapsed, 3),
           "mib_per_s": round((sent - unacked) / 1024 / elapsed, 1)})


def _topic_ops(bootstrap: str, partitions: int, rounds: int, out: dict) -> None:
    """CreateTopics then DeleteTopics of one topic of `partitions`, `rounds` times; the
    seconds each took go to `out`."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out["create_s"], out["delete_s"] = [], []
    for i in range(rounds):
        name = f"loop-stall-topics-{i}"
        t0 = time.perf_counter()
        admin.create_topics([NewTopic(name, partitions, 1)],
                            operation_timeout=60)[name].result(120)
        t1 = time.perf_counter()
        admin.delete_topics([name], operation_timeout=60)[name].result(120)
        out["create_s"].append(round(t1 - t0, 3))
        out["delete_s"].append(round(time.perf_counter() - t1, 3))


def _topic_phase(port: int, bootstrap: str, args) -> tuple[list[float], dict]:
    out: dict = {}
    ops = threading.Thread(target=_topic_ops, args=(bootstrap, args.topic_partitions,
                                                    args.topic_rounds, out), daemon=True)
    ops.start()
    rtts = probe("127.0.0.1", port, 300.0, args.interval_ms / 1000, _Done(ops))
    ops.join(300)
    if "delete_s" not in out or len(out["delete_s"]) < args.topic_rounds:
        raise RuntimeError(f"topic operations did not complete: {out}")
    return sorted(rtts), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.loop_stall")
    ap.add_argument("--broker-rev", metavar="GIT-REV",
                    help="run kafkalite as committed at this revision instead of the tree")
    ap.add_argument("--seconds", type=float, default=20.0, help="produce load duration")
    ap.add_argument("--rate-mib", type=float, default=60.0, help="produce rate, MiB/s")
    ap.add_argument("--segment-mib", type=int, default=64, help="log.segment.bytes in MiB")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--interval-ms", type=float, default=2.0, help="pause between probes")
    ap.add_argument("--broker-set", action="append", default=[], metavar="K=V")
    ap.add_argument("--topic-partitions", type=int, default=500,
                    help="partitions of the topic created and deleted in the first phase")
    ap.add_argument("--topic-rounds", type=int, default=3,
                    help="CreateTopics+DeleteTopics rounds (0: no topic phase)")
    ap.add_argument("--only-topics", action="store_true", help="skip the produce phase")
    args = ap.parse_args(argv)
    command = shlex.join(["python", "-m", "benchmarks.loop_stall",
                          *(sys.argv[1:] if argv is None else argv)])
    src = rev = None
    if args.broker_rev:
        src, sha = export_revision(os.path.dirname(os.path.dirname(os.path.abspath(
            __file__))), args.broker_rev)
        rev = sha[:10]
    settings = {"log.segment.bytes": str(args.segment_mib * 2**20),
                **dict(kv.split("=", 1) for kv in args.broker_set)}
    broker, _ = spawn_broker(settings, src_dir=src)
    try:
        from .workloads import create_topic
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        stop = ctx.Event()
        idle = probe("127.0.0.1", broker.port, 2.0, args.interval_ms / 1000, stop)
        topics = _topic_phase(broker.port, broker.bootstrap, args) if args.topic_rounds \
            else None
        if args.only_topics:
            _report(command, rev, sorted(idle), topics, None, args)
            return 0
        load = ctx.Process(target=_load, args=(broker.bootstrap, args.rate_mib,
                                                args.seconds, q))
        load.start()
        rtts = probe("127.0.0.1", broker.port, args.seconds + 30, args.interval_ms / 1000,
                     _Done(load))
        result = q.get(timeout=60)
        load.join(30)
        segments = len(glob.glob(os.path.join(broker.data_dir, f"{TOPIC}-*", "*.log")))
    finally:
        broker.cleanup()
    _report(command, rev, sorted(idle), topics, (sorted(rtts), result, segments), args)
    return 0


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _report(command: str, rev: str | None, idle: list[float], topics, load, args) -> None:
    print(f"command: {command}")
    print(f"kafkalite: {rev or 'working tree'}")
    print(f"idle:  {len(idle)} probes, p50 {statistics.median(idle):.2f} ms, "
          f"p99 {_pct(idle, 0.99):.2f} ms, max {idle[-1]:.2f} ms")
    if topics is not None:
        rtts, took = topics
        print(f"topics: {args.topic_rounds} x CreateTopics+DeleteTopics of "
              f"{args.topic_partitions} partitions (create s {took['create_s']}, delete s "
              f"{took['delete_s']}): {len(rtts)} probes, p50 {statistics.median(rtts):.2f} "
              f"ms, p99 {_pct(rtts, 0.99):.2f} ms, max {rtts[-1]:.2f} ms; over 20 ms: "
              f"{sum(r > 20 for r in rtts)}")
    if load is None:
        return
    rtts, result, segments = load
    print(f"load: {result['acked']} x 1 KiB acks=1 in {result['seconds']} s "
          f"({result['mib_per_s']} MiB/s), {segments - args.partitions} segment rolls "
          f"(log.segment.bytes {args.segment_mib} MiB, {args.partitions} partitions)")
    print(f"load:  {len(rtts)} probes, p50 {statistics.median(rtts):.2f} ms, "
          f"p99 {_pct(rtts, 0.99):.2f} ms, p99.9 {_pct(rtts, 0.999):.2f} ms, "
          f"max {rtts[-1]:.2f} ms; over 20 ms: {sum(r > 20 for r in rtts)}")


class _Done:
    """Stops the probe when the load process has exited."""

    def __init__(self, proc):
        self.proc = proc

    def is_set(self) -> bool:
        return not self.proc.is_alive()


if __name__ == "__main__":
    sys.exit(main())
