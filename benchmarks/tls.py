# TLS against plaintext: produce (acks=1, then acks=all) and consume 1 KiB records with
# confluent-kafka over a broker's PLAINTEXT listener and over its SSL listener (server
# certificate only, TLS 1.2/1.3 as negotiated), for kafkalite and Apache Kafka 3.8.0 in the
# same run, each configured with the same listener and ssl.* properties (PEM keystore and
# truststore made by tests/helpers/certs.py in a temporary directory). The producer and
# consumer are benchmarks/workloads.py's; broker CPU seconds are read from /proc around each
# phase. Loopback only; every phase stops at its record count or --phase-timeout.
#
#   .venv/bin/python -m benchmarks.tls [--records 100000] [--size 1024] [--no-kafka]
from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import uuid
from typing import Iterator

from . import workloads
from .broker_proc import cpu_seconds
from .kafka_ref import find_java

PARTITIONS = 4


def listener_settings(pki, plain: int, tls: int, controller: bool) -> dict[str, str]:
    extra_listener = f",CONTROLLER://127.0.0.1:{plain + 1}" if controller else ""
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain}{extra_listener},SSL://127.0.0.1:{tls}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "listener.security.protocol.map": ("CONTROLLER:PLAINTEXT," if controller else "")
        + "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "num.partitions": str(PARTITIONS),
    }


@contextlib.contextmanager
def broker(kind: str, pki, data_dir: str) -> Iterator[tuple[int, int, int]]:
    """(plaintext port, SSL port, broker pid) of a running kafkalite or Kafka 3.8."""
    from tests.helpers.real_kafka import RealKafka, free_port_pair
    plain, tls = free_port_pair(), free_port_pair()
    if kind == "kafkalite":
        from kafkalite.testing import BrokerProcess
        with BrokerProcess(data_dir=data_dir, port=plain,
                           settings=listener_settings(pki, plain, tls, False)) as bp:
            yield plain, tls, bp.proc.pid
        return
    kafka = RealKafka(data_dir=data_dir, port=plain,
                      settings=listener_settings(pki, plain, tls, True))
    try:
        kafka.start()
        yield plain, tls, find_java(kafka.proc.pid) or kafka.proc.pid
    finally:
        kafka.cleanup()


def run(kind: str, pki, args) -> dict:
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix=f"tls-bench-{kind}-") as d, \
            broker(kind, pki, d + "/data") as (plain, tls, pid):
        for proto, port, conf in (("PLAINTEXT", plain, {}),
                                  ("SSL", tls, {"security.protocol": "SSL",
                                                "ssl.ca.location": pki.ca})):
            bootstrap = f"127.0.0.1:{port}"
            for acks in ("1", "all"):
                topic = f"tls-bench-{proto.lower()}-{acks}-{uuid.uuid4().hex[:6]}"
                workloads.create_topic(f"127.0.0.1:{plain}", topic, PARTITIONS)
                cpu0 = cpu_seconds(pid)
                p = workloads.produce(bootstrap, topic, args.size, acks, args.records,
                                      args.phase_timeout, client_conf=conf)
                p["broker_cpu_s"] = round(cpu_seconds(pid) - cpu0, 2)
                out[f"{proto} produce acks={acks}"] = p
                if acks == "1":
                    cpu0 = cpu_seconds(pid)
                    c = workloads.consume(bootstrap, topic, PARTITIONS, args.size,
                                          p["acked"], args.phase_timeout, client_conf=conf)
                    c["broker_cpu_s"] = round(cpu_seconds(pid) - cpu0, 2)
                    out[f"{proto} consume"] = c
                workloads.delete_topic(f"127.0.0.1:{plain}", topic)
                print(f"  {kind:<10} {proto:<9} acks={acks:<3} produce "
                      f"{p['msgs_per_s']:>8,} rec/s {p['mib_per_s']:>7} MiB/s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tls")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--phase-timeout", type=float, default=120.0)
    ap.add_argument("--no-kafka", action="store_true", help="kafkalite alone")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    from tests.helpers.certs import make_pki
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tls-bench-pki-") as d:
        pki = make_pki(d)
        kinds = ["kafkalite"] + ([] if args.no_kafka else ["kafka 3.8.0"])
        for kind in kinds:
            results[kind] = run("kafka" if kind != "kafkalite" else kind, pki, args)
    print(f"\n{args.records:,} records of {args.size} B, {PARTITIONS} partitions; MiB/s "
          "(rec/s), broker CPU s; consume rate from first to last message")
    phases = list(results["kafkalite"])
    print(f"{'phase':<26}" + "".join(f"{k:>34}" for k in results))
    for phase in phases:
        cells = []
        for k in results:
            r = results[k][phase]
            ok = "" if r["complete"] else " INCOMPLETE"
            cells.append(f"{r['mib_per_s']:>7} ({r['msgs_per_s']:>7,}) {r['broker_cpu_s']:>5}s{ok}")
        print(f"{phase:<26}" + "".join(f"{c:>34}" for c in cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["complete"] for k in results for r in results[k].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
