# Failover time (issue 17's benchmark): from the partition leader's death to the producer
# resuming, kafkalite against Apache Kafka 3.8.0 in ZooKeeper mode, side by side in one run.
#
#   .venv/bin/python -m benchmarks.failover_time --rounds 5 --session-ms 6000 [--rate 2000]
#       [--modes kill,term] [--no-kafka] [--out benchmarks/results]
#
# One ZooKeeper; 3 kafkalite brokers under one chroot and 3 Kafka 3.8 brokers under another,
# both given benchmarks/failover_cluster.py's shared settings (the session timeout, replica
# settings, no automatic rebalance). On each: an RF=3 topic with min.insync.replicas=2, one
# partition whose preferred leader is not the controller (the controller's own failover
# would be a different measurement). A round, per mode and per cluster (the clusters take
# turns): an idempotent acks=all confluent-kafka producer sends --rate records/s to the
# partition (the same client settings on both); after --warmup-s of acknowledged records the
# leader gets SIGKILL (`kill`) or SIGTERM (`term`, controlled shutdown). Measured from the
# signal on the monotonic clock:
#   resume    the end of the longest pause between two consecutive acknowledgements after
#             the signal (the producer resuming: acknowledgements arrive every few ms
#             otherwise, so this is the outage the application sees);
#   znode     the first state-znode change naming a new leader (kazoo watch);
#   deregistered  the dead broker's /brokers/ids znode gone (session expiry after SIGKILL).
# Then the producer stops, the broker restarts, the ISR fills again and ElectLeaders
# (preferred) moves leadership home. At the end every acknowledged record is looked up in
# the partition: lost = acknowledged values not in the log, duplicated = values in it twice.
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import statistics
import sys
import threading
import time
import uuid

from . import failover_cluster as fc

SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}


class RateProducer:
    """An idempotent acks=all producer sending `rate` records/s to partition 0 from a thread
    of its own, stamping each acknowledgement (the delivery callback runs in that thread's
    poll(), at most a millisecond after librdkafka has the answer)."""

    def __init__(self, bootstrap: str, topic: str, rate: int, tag: str):
        import confluent_kafka as ck
        self.p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                              "enable.idempotence": True, "linger.ms": 5,
                              "message.timeout.ms": 120000})
        self.topic, self.rate, self.tag = topic, rate, tag
        self.acks: list[tuple[float, bytes, int]] = []  # (when, value, offset)
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rate-producer", daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acks.append((time.monotonic(), msg.value(), msg.offset()))
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        interval = 1.0 / self.rate
        due = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < due:
                self.p.poll(min(due - now, 0.005))
                continue
            try:
                self.p.produce(self.topic, b"%s-%d" % (self.tag.encode(), self.sent),
                               partition=0, on_delivery=self._delivered)
                self.sent += 1
                due = max(due + interval, now - 1.0)  # behind by > 1 s: no burst to catch up
            except BufferError:
                pass
            self.p.poll(0)

    def start(self) -> "RateProducer":
        self._thread.start()
        return self

    def stop(self, timeout: float = 150.0) -> None:
        self._stop.set()
        self._thread.join(10)
        self.p.flush(timeout)


def resume_after(acks: list[tuple[float, bytes, int]], t_sig: float) -> float | None:
    """Seconds from t_sig to the end of the longest ack pause after it (a pause that began
    before the signal counts from the signal: a stall of the machine just before it is not
    the failover's)."""
    times = sorted(t for t, _, _ in acks)
    best = None
    for before, after in zip(times, times[1:]):
        pause = after - max(before, t_sig)
        if after > t_sig and (best is None or pause > best[0]):
            best = (pause, after)
    return None if best is None else best[1] - t_sig


def create_topic(c: fc.Cluster, topic: str, timeout: float = 60.0) -> int:
    """The RF=3 topic, preferred leader a broker that is not the controller: returns it."""
    from confluent_kafka.admin import AdminClient, NewTopic
    cid = c.controller()
    leader = min(i for i in fc.BROKER_IDS if i != cid)
    replicas = [leader, *(i for i in fc.BROKER_IDS if i != leader)]
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(timeout)
    fc.wait_for(lambda: c.state(topic), lambda s: s is not None and len(s.isr) == 3
                and s.leader == leader, timeout, f"{c.name}: {topic} led by {leader}")
    return leader


def lead_home(c: fc.Cluster, topic: str, leader: int, timeout: float) -> None:
    """ISR full again, then ElectLeaders (preferred) until `leader` leads (bounded)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient
    fc.wait_for(lambda: c.state(topic), lambda s: s is not None and len(s.isr) == 3,
                timeout, f"{c.name}: ISR full again")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    deadline = time.monotonic() + timeout
    while (s := c.state(topic)) is None or s.leader != leader:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{c.name}: {leader} did not lead again (state {s})")
        with contextlib.suppress(Exception):  # the controller may answer before it settled
            admin.elect_leaders(ck.ElectionType.PREFERRED,
                                [ck.TopicPartition(topic, 0)]).result(15)
        time.sleep(0.5)


def one_round(c: fc.Cluster, topic: str, leader: int, mode: str, args) -> dict:
    limit = args.session_ms / 1000 * 3 + 30
    producer = RateProducer(c.bootstrap, topic, args.rate, uuid.uuid4().hex[:8]).start()
    try:
        fc.wait_for(lambda: len(producer.acks), lambda n: n >= args.rate * args.warmup_s,
                    60, f"{c.name}: warm-up acknowledgements")
        t_sig = time.monotonic()
        c.signal(leader, SIGNALS[mode])
        fc.wait_for(lambda: c.first_state(t_sig, lambda s: s.leader not in (leader, -1)),
                    lambda t: t is not None, limit, f"{c.name}: a new leader")
        fc.wait_for(lambda: sum(t > t_sig for t, _, _ in producer.acks),
                    lambda n: n >= args.rate, limit, f"{c.name}: the producer resuming")
        time.sleep(0.5)  # a resumed producer keeps going: no later, longer pause
    finally:
        producer.stop()
    t_new = c.first_state(t_sig, lambda s: s.leader not in (leader, -1))
    gone = c.first_gone(t_sig, leader)
    new_state = c.state(topic)
    out = {"mode": mode, "leader": leader, "new_leader": new_state.leader if new_state else None,
           "resume_s": _r(resume_after(producer.acks, t_sig)),
           "znode_s": _r(None if t_new is None else t_new - t_sig),
           "deregistered_s": _r(None if gone is None else gone - t_sig),
           "sent": producer.sent, "acked": len(producer.acks), "errors": producer.errors[:5],
           "error_count": len(producer.errors)}
    c.restart(leader)
    lead_home(c, topic, leader, limit)
    out["acked_values"] = [(v.decode(), o) for _, v, o in producer.acks]
    return out


def _commit() -> str | None:
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, timeout=10, cwd=os.path.dirname(__file__)
                              ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def audit(c: fc.Cluster, topic: str, acked: list[tuple[str, int]], timeout: float = 120.0
          ) -> dict:
    """Read the partition whole: acknowledged values missing, values present twice."""
    import confluent_kafka as ck
    consumer = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"audit-{topic}",
                            "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        seen: dict[str, int] = {}
        position, deadline = 0, time.monotonic() + timeout
        while position < high and time.monotonic() < deadline:
            for m in consumer.consume(10000, timeout=1.0):
                if m.error() is None:
                    seen[m.value().decode()] = seen.get(m.value().decode(), 0) + 1
                    position = m.offset() + 1
    finally:
        consumer.close()
    return {"log_records": sum(seen.values()), "high_watermark": high,
            "read_complete": position >= high,
            "lost": sum(v not in seen for v, _ in acked),
            "duplicated": sum(n > 1 for n in seen.values())}


def summarize(rounds: list[dict]) -> dict:
    out = {}
    for key in ("resume_s", "znode_s", "deregistered_s"):
        xs = [r[key] for r in rounds if r[key] is not None]
        out[key] = {"median": _r(statistics.median(xs)) if xs else None,
                    "max": _r(max(xs)) if xs else None, "n": len(xs)}
    return out


def table(doc: dict) -> str:
    names = list(doc["clusters"])
    lines = [f"failover time, {doc['rounds']} rounds, zookeeper.session.timeout.ms="
             f"{doc['session_ms']}, {doc['rate']} records/s idempotent acks=all, RF=3 "
             "min.insync.replicas=2", ""]
    head = f"{'mode':<6}{'figure (s from the signal)':<28}" + "".join(
        f"{n + ' median':>20}{'max':>8}" for n in names)
    head += f"{'ratio':>8}" if len(names) == 2 else ""
    lines += [head, "-" * len(head)]
    for mode in doc["modes"]:
        for key, label in (("resume_s", "producer resumes"), ("znode_s", "new leader in ZK"),
                           ("deregistered_s", "broker znode gone")):
            cells = [doc["clusters"][n]["summary"][mode][key] for n in names]
            row = f"{mode:<6}{label:<28}" + "".join(
                f"{c['median'] if c['median'] is not None else '-':>20}"
                f"{c['max'] if c['max'] is not None else '-':>8}" for c in cells)
            if len(names) == 2 and cells[0]["median"] and cells[1]["median"]:
                row += f"{cells[0]['median'] / cells[1]['median']:>8.2f}"
            lines.append(row)
    lines.append("")
    for n in names:
        a = doc["clusters"][n]["audit"]
        lines.append(f"{n}: {a['lost']} acknowledged records lost, {a['duplicated']} "
                     f"duplicated, {a['log_records']:,} records in the log; producer errors "
                     f"{sum(r['error_count'] for r in doc['clusters'][n]['rounds'])}")
    lines.append("(ratio = kafkalite / Kafka of the medians; lower is faster)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.failover_time")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--session-ms", type=int, default=6000,
                    help="zookeeper.session.timeout.ms of every broker of both clusters")
    ap.add_argument("--rate", type=int, default=2000, help="records/s the producer sends")
    ap.add_argument("--warmup-s", type=float, default=2.0,
                    help="seconds of acknowledged records before each signal")
    ap.add_argument("--modes", default="kill,term", help="kill (SIGKILL), term (SIGTERM)")
    ap.add_argument("--no-kafka", action="store_true", help="leave out Apache Kafka 3.8")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(SIGNALS):
        ap.error(f"--modes: {modes} (kill, term)")
    started = datetime.datetime.now(datetime.timezone.utc)
    with contextlib.ExitStack() as stack:
        zookeeper = stack.enter_context(fc.zookeeper_server())
        clusters = [stack.enter_context(fc.kafkalite_cluster(zookeeper, args.session_ms))]
        if not args.no_kafka:
            from tests.helpers.real_kafka import unavailable_reason
            if (reason := unavailable_reason()) is None:
                clusters.append(stack.enter_context(fc.kafka_cluster(zookeeper, args.session_ms)))
            else:
                print(f"kafka 3.8.0: skipped ({reason})", file=sys.stderr)
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        leaders = {}
        for c in clusters:
            leaders[c.name] = create_topic(c, topic)
            c.watch(topic)
        rounds: dict[str, list[dict]] = {c.name: [] for c in clusters}
        for i in range(args.rounds):
            for mode in modes:
                for c in clusters:  # taking turns: a neighbour's burst hits both alike
                    r = one_round(c, topic, leaders[c.name], mode, args)
                    rounds[c.name].append(r)
                    print(f"round {i + 1} {mode:<4} {c.name:<12} resume {r['resume_s']} s, "
                          f"new leader in ZK {r['znode_s']} s, broker znode gone "
                          f"{r['deregistered_s']} s, acked {r['acked']}/{r['sent']}",
                          file=sys.stderr, flush=True)
        doc = {"benchmark": "failover_time", "started_at": started.isoformat(),
               "command": " ".join(["python -m benchmarks.failover_time", *(argv or sys.argv[1:])]),
               "rounds": args.rounds, "session_ms": args.session_ms, "rate": args.rate,
               "modes": modes, "settings": fc.shared_settings(args.session_ms),
               "kafkalite_commit": _commit(),
               "leaders": leaders, "clusters": {}}
        for c in clusters:
            acked = [a for r in rounds[c.name] for a in r.pop("acked_values")]
            doc["clusters"][c.name] = {
                "audit": audit(c, topic, acked), "rounds": rounds[c.name],
                "summary": {m: summarize([r for r in rounds[c.name] if r["mode"] == m])
                            for m in modes}}
    print(table(doc))
    os.makedirs(args.out, exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    for name in (f"failover_time-{stamp}.json", "failover_time-latest.json"):
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    ok = all(a["audit"]["lost"] == 0 and a["audit"]["read_complete"]
             for a in doc["clusters"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
