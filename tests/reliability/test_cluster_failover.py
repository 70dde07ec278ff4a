# Failover reliability of a 3-broker kafkalite cluster on ZooKeeper (issue 17, "How it is
# proven"): an idempotent confluent-kafka producer (acks=all) in a child process writes
# numbered records to an RF=3, min.insync.replicas=2 topic of 3 partitions while the test
# SIGKILLs a broker (most of the time the leader of some partition, every third cycle the
# group's coordinator), waits for the controller's election, restarts it, waits for the ISR
# to be whole again, and repeats. Meanwhile a consumer group of two confluent-kafka members
# (tests/helpers/group_consumer.py, manual commits) reads the topic; __consumer_offsets has
# RF=3. At the end every acknowledged record is read back once, at the offset its delivery
# report gave, in per-partition order, and every replica holds the same batches up to the HW;
# the group consumed every acknowledged record, its commits survived the coordinator moves
# (OffsetFetch is never below a commit a member saw acknowledged) and a fresh member starts
# exactly at them. test_cluster_failover_kafka.py runs the same loop on Kafka 3.8.
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

from kafkalite.coordinator.offsets_log import partition_for
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import OFFSETS, found, leader_of, offset_fetch
from tests.cluster.test_membership import WAIT_S, brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id, create, states
from tests.helpers.follow_clients import confluent_report, offset_of
from tests.helpers.group_consumer import (consume_loop, consumed_count, group_read,
                                          read_group_reports)
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
GROUP = "failover-group"
MEMBERS = 2
OFFSETS_PARTITIONS = 3
GROUP_SETTINGS = {"offsets.topic.replication.factor": "3",
                  "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}


def produce_loop(servers: str, out_path: str, stop) -> None:
    """Child process: numbered records round-robin over the partitions until `stop`; every
    delivery report is a line 'ok N partition offset wall' or 'err N code'."""
    import confluent_kafka as ck
    out = open(out_path, "a", buffering=1)
    p = ck.Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": MSG_TIMEOUT_MS, "log_level": 2,
                     "error_cb": lambda e: out.write(f"client {e.code()} {e.fatal()} {e}\n")})
    report = confluent_report(out, wall=True)
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
                acked[int(parts[1])] = (int(parts[2]), offset_of(parts[3]), float(parts[4]))
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


def whole_isr(z, offsets: bool = False) -> bool:
    """Every partition of TOPIC (and with `offsets` the group's __consumer_offsets one) has
    all three brokers in its ISR."""
    found = list(states(z, TOPIC, range(PARTITIONS)).values())
    if offsets:
        found += states(z, OFFSETS, [partition_for(GROUP, OFFSETS_PARTITIONS)]).values()
    return len(found) == PARTITIONS + offsets and all(set(s.isr) == set(IDS) for s in found)


def in_isr(z, broker: int) -> list[int]:
    """The partitions whose ISR names `broker`."""
    return [p for p, s in states(z, TOPIC, range(PARTITIONS)).items() if broker in s.isr]


def replica_batches(root: str, partition: int, hw: int) -> list[bytes]:
    """The whole batches of the replica's segment files (under `root`) below `hw`, as
    stored."""
    out = []
    for f in sorted(glob.glob(os.path.join(root, f"{TOPIC}-{partition}", "*.log"))):
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


def kafkalite_cluster(brokers, zk):  # noqa: F811
    """Three kafkalite brokers on the test's chroot: ({id: broker}, kazoo session)."""
    procs = dict(zip(IDS, brokers(*IDS, **SETTINGS, **GROUP_SETTINGS)))
    z = zk()
    registered(z, set(IDS))
    return procs, z


def run_cycles(procs, z, tmp_path, cycles: int, log_root=lambda b: b.data_dir) -> None:
    """The kill loop on a started cluster ({id: broker process}, kazoo session on its
    chroot); `log_root(broker)` is the directory holding its partition directories."""
    seed = int(os.environ.get("KAFKALITE_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"\ncluster failover: seed {seed}, {cycles} cycles")
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    row = eventually(lambda: create(procs[cid].bootstrap, TOPIC, partitions=PARTITIONS, rf=3,
                                    configs={"min.insync.replicas": "2"}),
                     lambda r: r.error_code in (0, ErrorCode.topic_already_exists),
                     timeout=WAIT_S)
    assert row.error_code in (0, ErrorCode.topic_already_exists), row
    assert eventually(lambda: whole_isr(z), bool, timeout=WAIT_S)
    servers = ",".join(b.bootstrap for b in procs.values())
    # the group's coordinator exists (its __consumer_offsets partition, RF=3) before a kill
    found(servers.split(",")[0], GROUP)
    assert eventually(lambda: whole_isr(z, offsets=True), bool, timeout=WAIT_S)
    reports = str(tmp_path / "reports.txt")
    members = [str(tmp_path / f"member{i}.txt") for i in range(MEMBERS)]
    ctx = multiprocessing.get_context("spawn")
    stop, stop_group = ctx.Event(), ctx.Event()
    child = ctx.Process(target=produce_loop, args=(servers, reports, stop), daemon=True)
    group = [ctx.Process(target=consume_loop, args=(servers, TOPIC, GROUP, path, stop_group),
                         daemon=True) for path in members]
    t_start = time.monotonic()
    child.start()
    for g in group:
        g.start()
    kills: list[tuple[float, int, int]] = []  # (wall time, cycle, broker)
    coordinator_kills = 0
    try:
        assert eventually(lambda: os.path.exists(reports) and acked_count(reports), lambda n: n
                          and n > 100, timeout=WAIT_S), "the producer never got going"
        assert eventually(lambda: consumed_count(members), lambda n: n > 100,
                          timeout=WAIT_S) > 100, "the group never got going"
        for cycle in range(1, cycles + 1):
            before = leaders(z)
            coordinator = leader_of(z, OFFSETS, GROUP)[0]
            if cycle % 3 == 1:  # the group's coordinator, every third cycle from the first
                victim = coordinator
            elif rng.random() < 0.8:
                victim = before[rng.randrange(PARTITIONS)]
            else:
                victim = rng.choice(IDS)
            coordinator_kills += victim == coordinator
            where = f"cycle {cycle}, broker {victim} (seed {seed})"
            print(f"{where}: SIGKILL; leaders {before}, controller {controller_id(z)}, "
                  f"group coordinator {coordinator}")
            kills.append((time.time(), cycle, victim))
            procs[victim].kill()
            led = [p for p, lead in before.items() if lead == victim]
            after = eventually(lambda: leaders(z), lambda ls: all(
                ls.get(p) not in (victim, -1, None) for p in led), timeout=WAIT_S)
            assert all(after.get(p) not in (victim, -1, None) for p in led), (where, after)
            assert eventually(lambda: leader_of(z, OFFSETS, GROUP)[0],
                              lambda lead: lead not in (victim, -1), timeout=WAIT_S) not in (
                victim, -1), f"{where}: the group's coordinator did not move"
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
            assert eventually(lambda: whole_isr(z, offsets=True), bool, timeout=WAIT_S), (
                where, states(z, TOPIC, range(PARTITIONS)))
            so_far, read = acked_count(reports), consumed_count(members)
            assert eventually(lambda: acked_count(reports), lambda n: n > so_far + 50,
                              timeout=WAIT_S) > so_far + 50, f"{where}: the producer is stuck"
            assert eventually(lambda: consumed_count(members), lambda n: n > read + 50,
                              timeout=WAIT_S) > read + 50, f"{where}: the group is stuck"
    finally:
        # the group stops first (its last commits below what the producer adds after), then
        # the producer
        stop_group.set()
        for g in group:
            g.join(30)
            if g.is_alive():
                g.kill()
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
    lost = [n for n, (p, off, _w) in acked.items()
            if seen.get(n) != (p, off) and (off >= 0 or seen.get(n, (-1,))[0] != p)]
    unknown = sum(1 for p, off, _w in acked.values() if off < 0)
    # the group: what its members committed successfully is still committed, wherever the
    # coordinator now is; a new member starts exactly there; members plus the new one read
    # every acknowledged record
    consumed, committed, total, refused = read_group_reports(members)
    now = found(servers.split(",")[0], GROUP)
    err, fetched = offset_fetch(procs[now].bootstrap, GROUP, TOPIC, list(range(PARTITIONS)))
    assert err == ErrorCode.none, err
    behind = {p: (fetched.get(p), off) for p, off in committed.items() if fetched.get(p, -1) < off}
    rest = group_read(servers, TOPIC, GROUP, fetched, hws)
    before_commit = {p: rows[0][0] for p, rows in rest.items()
                     if rows and rows[0][0] != fetched[p]}
    consumed |= {n for rows in rest.values() for _off, n in rows}
    unread = [n for n in acked if n not in consumed]
    print(f"cluster failover: {cycles} cycles ({coordinator_kills} of the group's coordinator) "
          f"in {elapsed:.0f} s, {len(acked)} acknowledged, {len(failed)} failed deliveries, "
          f"{unknown} without an offset, {len(lost)} lost, {len(duplicated)} duplicated, "
          f"HW {hws}, client errors "
          f"{len(client)}; group: {total} consumed, commits {committed} (fetched {fetched}, "
          f"coordinator {now}), {refused} commits refused, restart read "
          f"{sum(len(r) for r in rest.values())}; seed {seed}")
    assert not duplicated, f"duplicates (seed {seed}): {duplicated[:5]}"
    assert not lost, "lost (seed {}): {}".format(seed, [(n, acked[n][:2], seen.get(n),
                                                          cycle_of(n)) for n in lost[:5]])
    assert committed and not behind, f"commits lost (seed {seed}): {behind}"
    assert not before_commit, f"the restarted group re-read before its commits: {before_commit}"
    assert not unread, f"acknowledged, never consumed (seed {seed}): {sorted(unread)[:10]}"
    for p, hw in hws.items():  # every replica: the very same batches below the HW
        want = replica_batches(log_root(procs[leaders(z)[p]]), p, hw)
        assert want and batch_headers(b"".join(want))[-1].last_offset == hw - 1
        for i, b in procs.items():
            have = eventually(lambda b=b: replica_batches(log_root(b), p, hw),
                              lambda d: d == want, timeout=WAIT_S)
            assert have == want, f"partition {p}: replica {i} differs below HW {hw} (seed {seed})"


def test_cluster_survives_leader_kills(brokers, zk, tmp_path):  # noqa: F811
    run_cycles(*kafkalite_cluster(brokers, zk), tmp_path, cycles=3)


@pytest.mark.long
def test_cluster_survives_leader_kills_50_times(brokers, zk, tmp_path):  # noqa: F811
    run_cycles(*kafkalite_cluster(brokers, zk), tmp_path,
               cycles=int(os.environ.get("KAFKALITE_CYCLES", 50)))
