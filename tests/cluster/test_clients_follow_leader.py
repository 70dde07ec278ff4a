# Every client follows leadership changes (issue 17): for kafka-python, aiokafka,
# confluent-kafka and the Java client (Kafka 3.8's verifiable producer and consumer), a
# producer (acks=all, idempotent) and a consumer in a group run on three kafkalite brokers
# against an RF=3, min.insync.replicas=2 topic while the partition's leader, which is also
# the group's coordinator, is SIGKILLed and restarted, and then the new leader is moved away
# by a controlled shutdown (SIGTERM) and restarted. Neither client is restarted: both keep
# going after each move, every acknowledged record is consumed, the consumer never re-reads
# below a commit it had made (its group resumes from its commits wherever the coordinator
# went), and the commits are still there at the end.
from __future__ import annotations

import time

import pytest

from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import OFFSETS, found, leader_of, offset_fetch
from tests.cluster.test_membership import WAIT_S, brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id, create, states
from tests.helpers.follow_clients import CLIENTS, ClientRun, offset_of
from tests.helpers.real_kafka import eventually, unavailable_reason

TOPIC = "follow"
IDS = (1, 2, 3)
OFFSETS_PARTITIONS = 3
SETTINGS = {"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
PROGRESS = 30  # records each client must get through after a move


def leader(z) -> int:
    st = states(z, TOPIC, [0]).get(0)
    return st.leader if st is not None else -1


def whole(z) -> bool:
    """TOPIC's partition and every __consumer_offsets partition have all three in the ISR."""
    found_ = [states(z, TOPIC, [0]).get(0),
              *states(z, OFFSETS, range(OFFSETS_PARTITIONS)).values()]
    return len(found_) == 1 + OFFSETS_PARTITIONS and all(
        s is not None and set(s.isr) == set(IDS) for s in found_)


def group_led_by(z, broker: int) -> str:
    """A group id whose coordinator (its __consumer_offsets partition's leader) is `broker`."""
    for i in range(200):
        group = f"follow-{i}"
        if (leader_of(z, OFFSETS, group) or (-1,))[0] == broker:
            return group
    raise AssertionError(f"no group led by {broker}: {states(z, OFFSETS, range(3))}")


def progressing(runs: list[ClientRun], where: str, t0: float) -> None:
    """Both the producer (acknowledgements) and the consumer (records) get further."""
    for run, kind in zip(runs, ("ok", "rec")):
        so_far = run.count(kind)
        got = eventually(lambda: run.count(kind), lambda n: n >= so_far + PROGRESS,
                         timeout=WAIT_S)
        assert got >= so_far + PROGRESS, f"{where}: the {run.role} is stuck at {got}: " \
            + run.tail()
    print(f"{time.monotonic() - t0:.1f} s: {where}")


def check_reports(produced: list[str], consumed: list[str]) -> dict:
    """What the two reports show (one partition: the idempotent producer's records are
    stored in the order of their numbers)."""
    acked: dict[int, tuple[int, int]] = {}  # N -> (partition, offset or -1: offset_of)
    failed = []
    for line in produced:
        kind, *rest = line.split()
        if kind == "ok":
            acked[int(rest[0])] = (int(rest[1]), offset_of(rest[2]))
        elif kind == "err":
            failed.append(line)
    read: dict[tuple[int, int], int] = {}
    last_commit: dict[int, int] = {}
    below_commit = []  # records read again below a commit made before: a commit lost
    for line in consumed:
        kind, *rest = line.split()
        if kind == "rec":
            n, p, off = int(rest[0]), int(rest[1]), int(rest[2])
            if off < last_commit.get(p, -1):
                below_commit.append((p, off, last_commit[p]))
            read[(p, off)] = n
        elif kind == "commit":
            p, off = int(rest[0]), int(rest[1])
            last_commit[p] = max(last_commit.get(p, -1), off)
    values = set(read.values())
    # the consumer stopped first: what it missed is only what was stored after its last read
    unread = sorted(n for n in acked if n not in values and n < max(values, default=-1))
    misplaced = [(n, where, read[where]) for n, where in acked.items()
                 if where in read and read[where] != n]
    return {"acked": len(acked), "failed": failed, "read": len(read), "unread": unread,
            "misplaced": misplaced, "below_commit": below_commit, "committed": last_commit,
            "unknown": sum(1 for _p, off in acked.values() if off < 0)}


@pytest.mark.parametrize("client", CLIENTS)
def test_client_follows_leader_moves(brokers, zk, tmp_path, client):  # noqa: F811
    if client == "java" and unavailable_reason() is not None:
        pytest.skip(unavailable_reason())
    procs = dict(zip(IDS, brokers(*IDS, **SETTINGS)))
    z = zk()
    registered(z, set(IDS))
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    assert create(procs[cid].bootstrap, TOPIC, partitions=1, rf=3,
                  configs={"min.insync.replicas": "2"}).error_code == 0
    found(procs[cid].bootstrap, "any")  # creates __consumer_offsets (RF=3)
    assert eventually(lambda: whole(z), bool, timeout=WAIT_S), states(z, OFFSETS, range(3))
    first = leader(z)
    group = group_led_by(z, first)
    servers = ",".join(b.bootstrap for b in procs.values())
    runs = [ClientRun(client, role, servers, TOPIC, group, str(tmp_path / f"{role}.txt"))
            for role in ("produce", "consume")]
    t0 = time.monotonic()
    for run in runs:
        run.start()
    try:
        progressing(runs, "start", t0)
        for move, lead in (("SIGKILL", first), ("SIGTERM", None)):
            lead = leader(z) if lead is None else lead
            where = f"{client}: {move} of leader {lead}"
            if move == "SIGKILL":
                procs[lead].kill()
            else:
                procs[lead].stop()  # controlled shutdown: the controller moves leadership first
            assert eventually(lambda: leader(z), lambda ld: ld not in (lead, -1),
                              timeout=WAIT_S) not in (lead, -1), where
            progressing(runs, f"{where}, while it is down", t0)
            registered(z, set(IDS) - {lead})  # a killed broker's session has expired
            procs[lead].start()
            assert eventually(lambda: whole(z), bool, timeout=WAIT_S), where
            progressing(runs, f"{where}, after its restart", t0)
    finally:
        runs[1].stop()  # the consumer first: the producer's last records stay uncommitted
        runs[0].stop()
        print(f"{time.monotonic() - t0:.1f} s: both stopped")
    produced, consumed = runs[0].lines(), runs[1].lines()
    assert any(line.startswith("end ") for line in produced), produced[-3:]
    got = check_reports(produced, consumed)
    print(f"\n{client}: {got['acked']} acknowledged ({got['unknown']} without an offset), "
          f"{len(got['failed'])} failed, {got['read']} read, commits {got['committed']}")
    assert not got["failed"], got["failed"][:5]
    assert not got["unread"], f"acknowledged, never consumed: {got['unread'][:10]}"
    assert not got["misplaced"], f"not at the offset acknowledged: {got['misplaced'][:5]}"
    assert not got["below_commit"], f"re-read below its commits: {got['below_commit'][:5]}"
    end = got["committed"].get(0, -1)
    now = found(servers.split(",")[0], group)
    err, fetched = offset_fetch(procs[now].bootstrap, group, TOPIC, [0])
    assert (err, fetched.get(0)) == (ErrorCode.none, end) and end > 0, (err, fetched, end)
