# Failover reliability of a 3-broker kafkalite cluster on ZooKeeper (issue 17, "How it is
# proven"): an idempotent confluent-kafka producer (acks=all) in a child process writes
# numbered records to an RF=3, min.insync.replicas=2 topic of 3 partitions while the test
# SIGKILLs a broker (most of the time the leader of some partition), waits for the
# controller's election, restarts it, waits for the ISR to be whole again, and repeats.
# At the end every acknowledged record is read back once, at the offset its delivery report
# gave, in per-partition order, and every replica holds the same batches up to the HW.
# Bounded (3 cycles) in the normal suite; the long run (50 cycles, seed printed, reusable):
#   KAFKALITE_LONG=1 PYTHONPATH=$PWD .venv/bin/python -m pytest -p no:cacheprovider -q -s \
#       tests/reliability/test_cluster_failover.py -m long   [KAFKALITE_SEED=N]
from __future__ import annotations

import glob
import multiprocessing
import os
import random
import time

import pytest

from tests.cluster.test_membership import WAIT_S, brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id, create, states
from tests.helpers.kbatch import batch_headers, fetch_raw
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

TOPIC = "failover"
PARTITIONS = 3
IDS = (1, 2, 3)
MSG_TIMEOUT_MS = 30000
RATE = 400  # records/s offered by the producer
SETTINGS = {"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
            "replica.high.watermark.checkpoint.interval.ms": "300"}


def produce_loop(servers: str, out_path: str, stop) -> None:
    """Child process: numbered records round-robin over the partitions until `stop`; every
    delivery report is a line 'ok N partition offset wall' or 'err N code'."""
    import confluent_kafka as ck
    out = open(out_path, "a", buffering=1)
    p = ck.Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": MSG_TIMEOUT_MS, "log_level": 2,
                     "error_cb": lambda e: out.write(f"client {e.code()} {e.fatal()} {e}\n")})

    def report(err, msg) -> None:
        n = int(msg.value())
        if err is None:
            out.write(f"ok {n} {msg.partition()} {msg.offset()} {time.time():.3f}\n")
        else:
            out.write(f"err {n} {err.code()}\n")
    n = 0
    while not stop.is_set():
        try:
            p.produce(TOPIC, value=b"%09d" % n, partition=n % PARTITIONS, on_delivery=report)
            n += 1
        except BufferError:
            pass
        p.poll(1 / RATE)
    left = p.flush(MSG_TIMEOUT_MS / 1000 + 10)
    out.write(f"end {n} {left}\n")
    out.close()


def read_reports(path: str):
    """(acked {n: (partition, offset, wall)}, failed [n], client errors, end line)."""
    acked, failed, client, end = {}, [], [], None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts[0] == "ok":
                acked[int(parts[1])] = (int(parts[2]), int(parts[3]), float(parts[4]))
            elif parts[0] == "err":
                failed.append(int(parts[1]))
            elif parts[0] == "client":
                client.append(line.strip())
            elif parts[0] == "end":
                end = (int(parts[1]), int(parts[2]))
    return acked, failed, client, end


def acked_count(path: str) -> int:
    with open(path) as f:
        return sum(1 for line in f if line.startswith("ok "))


def leaders(z) -> dict[int, int]:
    return {p: s.leader for p, s in states(z, TOPIC, range(PARTITIONS)).items()}


def whole_isr(z) -> bool:
    found = states(z, TOPIC, range(PARTITIONS))
    return len(found) == PARTITIONS and all(set(s.isr) == set(IDS) for s in found.values())


def in_isr(z, broker: int) -> list[int]:
    """The partitions whose ISR names `broker`."""
    return [p for p, s in states(z, TOPIC, range(PARTITIONS)).items() if broker in s.isr]


def replica_batches(broker, partition: int, hw: int) -> list[bytes]:
    """The whole batches of the replica's segment files below `hw`, as stored."""
    out = []
    for f in sorted(glob.glob(os.path.join(broker.data_dir, f"{TOPIC}-{partition}", "*.log"))):
        with open(f, "rb") as fh:
            data = fh.read()
        pos = 0
        for h in batch_headers(data):
            if h.last_offset < hw:
                out.append(data[pos:pos + h.size])
            pos += h.size
    return out


def read_back(servers: str, ends: dict[int, int]) -> dict[int, list[tuple[int, int]]]:
    """partition -> [(offset, n)] read from offset 0 up to `ends` (bounded)."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": "failover-check",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and any(
                (got[p][-1][0] + 1 if got[p] else 0) < ends[p] for p in got):
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got[m.partition()].append((m.offset(), int(m.value())))
    finally:
        c.close()
    return got


def high_watermarks(procs, z) -> dict[int, int]:
    out = {}
    for p, lead in leaders(z).items():
        with open_socket(procs[lead].bootstrap) as s:
            part = fetch_raw(s, TOPIC, p, 0)
            assert part.error_code == 0, (p, lead, part.error_code)
            out[p] = part.high_watermark
    return out


def run_cycles(brokers, zk, tmp_path, cycles: int) -> None:  # noqa: F811
    seed = int(os.environ.get("KAFKALITE_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"\ncluster failover: seed {seed}, {cycles} cycles")
    procs = dict(zip(IDS, brokers(*IDS, **SETTINGS)))
    z = zk()
    registered(z, set(IDS))
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    row = create(procs[cid].bootstrap, TOPIC, partitions=PARTITIONS, rf=3,
                 configs={"min.insync.replicas": "2"})
    assert row.error_code == 0
    assert eventually(lambda: whole_isr(z), bool, timeout=WAIT_S)
    servers = ",".join(b.bootstrap for b in procs.values())
    reports = str(tmp_path / "reports.txt")
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    child = ctx.Process(target=produce_loop, args=(servers, reports, stop), daemon=True)
    t_start = time.monotonic()
    child.start()
    kills: list[tuple[float, int, int]] = []  # (wall time, cycle, broker)
    try:
        assert eventually(lambda: os.path.exists(reports) and acked_count(reports), lambda n: n
                          and n > 100, timeout=WAIT_S), "the producer never got going"
        for cycle in range(1, cycles + 1):
            before = leaders(z)
            if rng.random() < 0.8:
                victim = before[rng.randrange(PARTITIONS)]
            else:
                victim = rng.choice(IDS)
            where = f"cycle {cycle}, broker {victim} (seed {seed})"
            print(f"{where}: SIGKILL; leaders {before}, controller {controller_id(z)}")
            kills.append((time.time(), cycle, victim))
            procs[victim].kill()
            led = [p for p, lead in before.items() if lead == victim]
            after = eventually(lambda: leaders(z), lambda ls: all(
                ls.get(p) not in (victim, -1, None) for p in led), timeout=WAIT_S)
            assert all(after.get(p) not in (victim, -1, None) for p in led), (where, after)
            assert eventually(lambda: controller_id(z), lambda c: c in procs and c != victim,
                              timeout=WAIT_S) not in (None, victim), where
            # its session has expired (a broker whose old registration is still there refuses
            # to start, as Kafka's does) and no ISR names it any more
            assert victim not in eventually(z.brokers, lambda ids: victim not in ids,
                                            timeout=WAIT_S), where
            assert eventually(lambda: in_isr(z, victim), lambda found: not found,
                              timeout=WAIT_S) == [], where
            time.sleep(rng.uniform(0.2, 1.5))  # producing on two brokers meanwhile
            procs[victim].start()
            assert eventually(lambda: whole_isr(z), bool, timeout=WAIT_S), (
                where, states(z, TOPIC, range(PARTITIONS)))
            so_far = acked_count(reports)
            assert eventually(lambda: acked_count(reports), lambda n: n > so_far + 50,
                              timeout=WAIT_S) > so_far + 50, f"{where}: the producer is stuck"
    finally:
        stop.set()
        child.join(MSG_TIMEOUT_MS / 1000 + 20)
        if child.is_alive():
            child.kill()
    elapsed = time.monotonic() - t_start
    acked, failed, client, end = read_reports(reports)
    assert end is not None and end[1] == 0, end  # every record reported
    hws = high_watermarks(procs, z)

    def cycle_of(n: int) -> str:  # the cycle during which record n was acknowledged
        wall = acked[n][2]
        last = [k for k in kills if k[0] <= wall]
        return f"cycle {last[-1][1]} broker {last[-1][2]}" if last else "before the first kill"
    got = read_back(servers, hws)
    seen: dict[int, tuple[int, int]] = {}
    duplicated = []
    for p, rows in got.items():
        numbers = [n for _off, n in rows]
        assert numbers == sorted(numbers), f"partition {p} out of order (seed {seed})"
        for off, n in rows:
            if n in seen:
                duplicated.append((n, seen[n], (p, off)))
            seen[n] = (p, off)
    lost = [n for n, (p, off, _w) in acked.items() if seen.get(n) != (p, off)]
    print(f"cluster failover: {cycles} cycles in {elapsed:.0f} s, {len(acked)} acknowledged, "
          f"{len(failed)} failed deliveries, {len(lost)} lost, {len(duplicated)} duplicated, "
          f"HW {hws}, client errors {len(client)}, seed {seed}")
    assert not duplicated, f"duplicates (seed {seed}): {duplicated[:5]}"
    assert not lost, "lost (seed {}): {}".format(seed, [(n, acked[n][:2], seen.get(n),
                                                          cycle_of(n)) for n in lost[:5]])
    for p, hw in hws.items():  # every replica: the very same batches below the HW
        want = replica_batches(procs[leaders(z)[p]], p, hw)
        assert want and batch_headers(b"".join(want))[-1].last_offset == hw - 1
        for i, b in procs.items():
            have = eventually(lambda b=b: replica_batches(b, p, hw), lambda d: d == want,
                              timeout=WAIT_S)
            assert have == want, f"partition {p}: replica {i} differs below HW {hw} (seed {seed})"


def test_cluster_survives_leader_kills(brokers, zk, tmp_path):  # noqa: F811
    run_cycles(brokers, zk, tmp_path, cycles=3)


@pytest.mark.long
def test_cluster_survives_leader_kills_50_times(brokers, zk, tmp_path):  # noqa: F811
    run_cycles(brokers, zk, tmp_path, cycles=int(os.environ.get("KAFKALITE_CYCLES", 50)))
