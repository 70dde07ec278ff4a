# Graceful shutdown under load: SIGTERM while many idempotent producers write.
#
#   python -m benchmarks.reliability.shutdown --clients 50 --rounds 20
#
# Each round: the clients (confluent-kafka, acks=all, idempotent, one thread each, spread
# over 8 partitions) produce for a random 1-3 s, the broker gets SIGTERM, must exit 0,
# restarts, and must report the clean-shutdown path ("Loaded N topics ... (clean)", no
# recovery scan); the clients keep running across the restart. After every restart the
# Model (verify.py) settles all acknowledgements: every acknowledged record readable, once,
# at its offset, byte-identical.
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time

from .common import Broker, Conn, create_topic, emit, loaded_lines
from .verify import Model
from .workers import ProducerWorker

TOPIC = "shutdown"
PARTS = list(range(8))


def run(clients: int = 50, rounds: int = 3, seed: int = 1, rate: float = 40.0) -> dict:
    rnd = random.Random(seed)
    d = tempfile.mkdtemp(prefix="kafkalite-shutdown-")
    b = Broker(data_dir=d, settings={"log.segment.bytes": "65536"})
    workers: list[ProducerWorker] = []
    out: dict = {"clients": clients, "rounds": 0, "exit_codes": [], "start_paths": [],
                 "stop_s": []}
    try:
        b.start_measured()
        with Conn(b.bootstrap) as c:
            create_topic(c, TOPIC, len(PARTS))
        model = Model(TOPIC, PARTS)
        workers = [ProducerWorker(b.bootstrap, TOPIC, PARTS, f"s{i}", rate,
                                  extra={"queue.buffering.max.messages": 500})
                   for i in range(clients)]
        for w in workers:
            w.start()
        taken = [0] * len(workers)

        def settle() -> None:
            for i, w in enumerate(workers):
                n = len(w.acked)
                model.add_acks(w.acked[taken[i]:n])
                taken[i] = n
            with Conn(b.bootstrap, timeout=30) as c:
                model.check(c)

        for r in range(rounds):
            time.sleep(rnd.uniform(1.0, 3.0))
            mark = b.log_mark()
            t0 = time.monotonic()
            out["exit_codes"].append(b.stop(timeout=30))
            out["stop_s"].append(round(time.monotonic() - t0, 2))
            b.start_measured()
            out["start_paths"].append([p for _n, p in loaded_lines(b.log_since(mark))])
            settle()
            out["rounds"] = r + 1
        for w in workers:
            w.finish()
        settle()
        out.update({"model": model.totals(), "violations": model.violations[:20],
                    "producer_fatal_errors": sum(w.stats.fatal for w in workers),
                    "delivery_failures": sum(w.stats.failed for w in workers),
                    "unflushed_at_end": sum(w.flush_left for w in workers),
                    "recovery_scans": sum(p.count("recovered") for p in out["start_paths"]),
                    "stop_s_max": max(out["stop_s"], default=0)})
        return out
    finally:
        for w in workers:
            w.stop_event.set()
        b.kill()
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="SIGTERM under load; check the clean path.")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    r = run(args.clients, args.rounds)
    emit(r, args.json)
    ok = not r["violations"] and r["model"]["lost"] == 0 and r["recovery_scans"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
