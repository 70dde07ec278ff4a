# Partition reassignment in a kafkalite cluster (issue 17, KIP-455 as Kafka 3.8's ZooKeeper
# mode runs it): three spawned brokers, an RF=2 topic on [1, 2] with data, moved to [2, 3]
# while an idempotent acks=all confluent-kafka producer runs. Broker 3 gets the data (its
# log byte-identical to the leader's), broker 1 deletes its local log, the topic znode ends
# with replicas [2, 3] and no adding/removing, leadership leaves broker 1, every acknowledged
# record is read back once. Then a reassignment that cannot complete (its new replica
# SIGSTOPped) is listed and cancelled, and the errors Kafka gives are checked.
from __future__ import annotations

import os
import signal
import threading
import time

from confluent_kafka import Consumer, Producer
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, CreateTopicsRequest,
                                  ListPartitionReassignmentsRequest)

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_zk_admin_apis import assignment, controller_id, states
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

TOPIC = "moving"
A = AlterPartitionReassignmentsRequest[0]
L = ListPartitionReassignmentsRequest[0]


def create_on(bootstrap: str, replicas: list[int]):
    T = CreateTopicsRequest[7].CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=TOPIC, num_partitions=-1, replication_factor=-1, assignments=[
            T.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[])], timeout_ms=15000, validate_only=False)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row


def alter(bootstrap: str, wanted: dict[tuple[str, int], list[int] | None]):
    """AlterPartitionReassignments v0: (top error, message, sorted partition rows)."""
    by_topic: dict[str, list] = {}
    for (t, p), r in wanted.items():
        by_topic.setdefault(t, []).append(A.ReassignableTopic.ReassignablePartition(
            partition_index=p, replicas=r))
    with open_socket(bootstrap, timeout=30) as s:
        resp = call(s, A(timeout_ms=15000, topics=[A.ReassignableTopic(name=t, partitions=ps)
                                                   for t, ps in by_topic.items()]))
    rows = sorted((t.name, p.partition_index, p.error_code, p.error_message)
                  for t in resp.responses for p in t.partitions)
    return resp.error_code, resp.error_message, rows


def listed(bootstrap: str, topics=None):
    """ListPartitionReassignments v0: (error, [(topic, partition, replicas, adding,
    removing)])."""
    req = L(timeout_ms=15000, topics=None if topics is None else [
        L.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in topics])
    with open_socket(bootstrap) as s:
        resp = call(s, req)
    return resp.error_code, sorted((t.name, p.partition_index, list(p.replicas),
                                    list(p.adding_replicas), list(p.removing_replicas))
                                   for t in resp.topics for p in t.partitions)


def settled(z: Zk, replicas: list[int]):
    """The topic znode at `replicas` (in any order) with nothing moving, and the
    partition's state, whose ISR is `replicas`."""
    def now():
        a = assignment(z, TOPIC)
        return None if a is None else (a.partitions.get(0), a.adding, a.removing,
                                       states(z, TOPIC, [0]).get(0))
    def done(n) -> bool:
        return n is not None and n[0] is not None and sorted(n[0]) == sorted(replicas) and \
            not n[1] and not n[2] and n[3] is not None and set(n[3].isr) == set(replicas)
    got = eventually(now, done, timeout=WAIT_S)
    assert done(got), got
    return got


def raw_topic_znode(z: Zk) -> dict:
    import json
    return json.loads(z.client.get(zkdata.topic_path(TOPIC))[0])


def error_cases(bootstrap: str, other: str) -> list:
    """Kafka's answers to refused reassignments (by the controller, then another broker)."""
    seen = []
    for label, target in (("duplicates", [2, 2]), ("unknown broker", [2, 9]),
                          ("negative", [2, -1]), ("empty", [])):
        seen.append((label, alter(bootstrap, {(TOPIC, 0): target})))
    seen.append(("unknown topic", alter(bootstrap, {("nope", 0): [2, 3]})))
    seen.append(("unknown partition", alter(bootstrap, {(TOPIC, 7): [2, 3]})))
    seen.append(("cancel none", alter(bootstrap, {(TOPIC, 0): None})))
    seen.append(("cancel unknown", alter(bootstrap, {("nope", 0): None})))
    seen.append(("not the controller", alter(other, {(TOPIC, 0): [2, 3]})))
    seen.append(("list on another", listed(other)))
    seen.append(("list none", listed(bootstrap)))
    return seen


class Load:
    """An idempotent acks=all confluent-kafka producer writing numbered records until
    stopped: what was acknowledged."""

    def __init__(self, bootstrap: str):
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                            "acks": "all", "linger.ms": 5})
        self._t = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg):
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(str(err))

    def _run(self):
        i = 0
        while not self._stop.is_set() and i < 200_000:
            self._p.produce(TOPIC, value=b"%08d" % i, partition=0, on_delivery=self._cb)
            i += 1
            if i % 50 == 0:
                self._p.poll(0.01)
        self._p.flush(30)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(60)


def read_all(bootstrap: str, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit":
                  False, "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    out: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(500, timeout=1.0):
                if m.error() is None:
                    out.append(m.value())
    finally:
        c.close()
    return out


def log_bytes(proc, topic: str = TOPIC) -> bytes | None:
    """The partition's segments, concatenated (None: no local log)."""
    d = os.path.join(proc.data_dir, f"{topic}-0")
    if not os.path.isdir(d):
        return None
    return b"".join(open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))
                    if f.endswith(".log"))


def cluster_with_topic(brokers, zk, replicas=(1, 2), **settings):
    """Brokers 1, 2, 3 and TOPIC on `replicas` (None: the two that are not the controller),
    settled: ({id: BrokerProcess}, a kazoo session, the controller, TOPIC's first state)."""
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **settings)))
    z = zk()
    registered(z, {1, 2, 3})
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    replicas = list(replicas or (i for i in sorted(procs) if i != cid))
    assert create_on(procs[cid].bootstrap, replicas).error_code == 0
    return procs, z, cid, settled(z, replicas)[3]


def test_reassignment_moves_the_replicas_and_the_leader_under_load(brokers, zk):
    procs, z, cid, first = cluster_with_topic(brokers, zk)
    ctl = procs[cid].bootstrap
    assert first.leader == 1
    with Load(procs[2].bootstrap) as load:
        eventually(lambda: len(load.acked), lambda n: n > 2000, timeout=WAIT_S)
        assert alter(ctl, {(TOPIC, 0): [2, 3]}) == (0, "", [(TOPIC, 0, 0, None)])
        _, _, _, state = settled(z, [2, 3])
        at_move = len(load.acked)
        eventually(lambda: len(load.acked), lambda n: n > at_move + 1000, timeout=WAIT_S)
    assert state.leader == 2 and state.leader_epoch > first.leader_epoch
    raw = raw_topic_znode(z)
    assert raw["partitions"] == {"0": [2, 3]}, raw
    assert raw["adding_replicas"] == {} and raw["removing_replicas"] == {}
    # broker 1 deleted its replica; broker 3's is the leader's, byte for byte
    assert eventually(lambda: log_bytes(procs[1]), lambda b: b is None,
                      timeout=WAIT_S) is None
    leader_log = eventually(lambda: (log_bytes(procs[2]), log_bytes(procs[3])),
                            lambda pair: pair[0] is not None and pair[0] == pair[1],
                            timeout=WAIT_S)
    assert leader_log[0] == leader_log[1] and len(leader_log[0]) > 0
    assert not load.errors
    got = read_all(procs[3].bootstrap, len(load.acked))
    assert len(got) == len(set(got))  # 0 duplicated
    assert set(load.acked) <= set(got)  # 0 lost
    assert listed(ctl) == (0, [])


def test_an_unfinished_reassignment_is_listed_and_cancelled(brokers, zk):
    procs, z, cid, _ = cluster_with_topic(brokers, zk)
    ctl = procs[cid].bootstrap
    other = procs[next(i for i in procs if i != cid)].bootstrap
    errors = error_cases(ctl, other)
    assert dict(errors)["not the controller"][0] == ErrorCode.not_controller
    assert dict(errors)["cancel none"][2] == [(TOPIC, 0, ErrorCode.no_reassignment_in_progress,
                                               "No partition reassignment is in progress.")]
    # the new replica stopped (shorter than its session): the move cannot complete
    stopped = 3 if cid != 3 else None
    target = [2, 3] if stopped else [2, 1]
    new = stopped or 1
    procs[new].proc.send_signal(signal.SIGSTOP)
    try:
        assert alter(ctl, {(TOPIC, 0): target})[2] == [(TOPIC, 0, 0, None)]
        moving = listed(ctl)
        assert moving == (0, [(TOPIC, 0, [*target, *(r for r in (1, 2) if r not in target)],
                               [new], [r for r in (1, 2) if r not in target])])
        assert listed(ctl, [(TOPIC, [0, 5]), ("nope", [0])]) == moving
        assert alter(ctl, {(TOPIC, 0): None})[2] == [(TOPIC, 0, 0, None)]
        settled(z, [1, 2])
        assert listed(ctl) == (0, [])
    finally:
        procs[new].proc.send_signal(signal.SIGCONT)
    # back to the original replicas, in the order Kafka keeps them (RS minus adding)
    raw = raw_topic_znode(z)
    assert raw["partitions"] == {"0": [r for r in (*target, 1, 2) if r != new][:2]}
    assert raw["adding_replicas"] == {} and raw["removing_replicas"] == {}
    assert log_bytes(procs[new]) is None


def test_the_legacy_znode_starts_reassignments_and_a_new_controller_completes_them(
        brokers, zk):
    """/admin/reassign_partitions (before KIP-455) moves the partition and is deleted once
    done; a reassignment whose new replica is stopped is completed by the next controller
    (the old one, also the leader, shut down meanwhile) when that replica catches up."""
    procs, z, cid, _ = cluster_with_topic(brokers, zk, None,
                                          **{"zookeeper.session.timeout.ms": "6000"})
    a, b = (i for i in sorted(procs) if i != cid)
    z.client.create(zkdata.REASSIGN_PARTITIONS, zkdata.encode_reassign_partitions(
        {(TOPIC, 0): [cid, a], ("nope", 0): [1, 2]}))
    settled(z, [cid, a])
    assert eventually(lambda: z.client.exists(zkdata.REASSIGN_PARTITIONS),
                      lambda st: st is None, timeout=WAIT_S) is None
    assert raw_topic_znode(z)["partitions"] == {"0": [cid, a]}
    assert eventually(lambda: log_bytes(procs[b]), lambda x: x is None, timeout=WAIT_S) is None
    # [cid, a] -> [a, b] with b stopped: in progress when the controller (and leader) leaves
    procs[b].proc.send_signal(signal.SIGSTOP)
    try:
        assert alter(procs[cid].bootstrap, {(TOPIC, 0): [a, b]})[2] == [(TOPIC, 0, 0, None)]
        assert listed(procs[cid].bootstrap)[1] == [(TOPIC, 0, [a, b, cid], [b], [cid])]
        procs[cid].stop()
        assert eventually(lambda: controller_id(z), lambda c: c == a, timeout=WAIT_S) == a
    finally:
        procs[b].proc.send_signal(signal.SIGCONT)
    _, _, _, state = settled(z, [a, b])
    assert state.leader == a
    raw = raw_topic_znode(z)
    assert raw["partitions"] == {"0": [a, b]} and raw["removing_replicas"] == {}
