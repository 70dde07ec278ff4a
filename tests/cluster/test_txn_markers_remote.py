# Transaction markers sent to other brokers (issue 17): a topic with a partition led by each of
# 3 brokers, a confluent-kafka transactional producer writing to all of them. The transaction
# coordinator leads only one of the partitions; the COMMIT/ABORT markers of the others go to
# their leaders by WriteTxnMarkers (cluster/marker_sender.py), so a read_committed consumer
# sees every committed record of every partition and none of the aborted ones. The offsets of
# send_offsets_to_transaction go to a group coordinator on another broker than the
# transaction coordinator, and become visible when the marker reaches that __consumer_offsets
# partition's leader. The sender's retries against one real broker, the cluster's state
# scripted (ScriptedView): the leader re-read after a failed round, and a partition the leader
# does not know while the cluster does left for the coordinator's retry, not dropped.
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kafka.protocol.admin import CreateTopicsRequest

from kafkalite.cluster.marker_sender import MarkerSender
from kafkalite.cluster.view import NO_NODE, BrokerNode, PartitionState
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (GROUP, OFFSETS, TRANSACTION, TXN, cluster, found,
                                               leader_of, offset_fetch)
from tests.cluster.test_coordinators_txn import consume_all
from tests.cluster.test_membership import WAIT_S, brokers, connect, zk  # noqa: F401
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import create_topic, eventually
from tests.integration.test_txn_log import latest

SETTINGS = {"transaction.state.log.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "1"}
TOPIC = "spread"
PARTITIONS = 3  # one led by each broker


def create_spread(bootstrap: str, ids: list[int]) -> int:
    """TOPIC with partition i's only replica on ids[i] (CreateTopics v7)."""
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[T.CreatableReplicaAssignment(partition_index=i, broker_ids=[b])
                     for i, b in enumerate(ids)])], timeout_ms=15000, validate_only=False)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row.error_code


def group_led_elsewhere(z, than: int) -> str:
    """A group id whose __consumer_offsets partition is led by another broker than `than`."""
    for i in range(100):
        gid = f"g-{i}-{uuid.uuid4().hex[:6]}"
        led = leader_of(z, OFFSETS, gid)
        if led is not None and led[0] != than:
            return gid
    raise AssertionError("no group led elsewhere")


def setup(brokers, zk):
    """The cluster, TOPIC with a partition led by each broker, a transactional id and a group
    whose coordinator is not the transaction coordinator's broker:
    (procs, everyone's bootstrap, txn id, group, group coordinator's id)."""
    procs, z, cid = cluster(brokers, zk, **SETTINGS)
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    found(procs[cid].bootstrap, txn_id, TRANSACTION)  # __transaction_state written, led
    txn_leader, _ = leader_of(z, TXN, txn_id)
    found(procs[cid].bootstrap, "probe", GROUP)  # __consumer_offsets written, led
    group = group_led_elsewhere(z, txn_leader)
    group_leader = found(procs[cid].bootstrap, group, GROUP)
    assert group_leader != txn_leader
    ids = sorted(procs)
    assert create_spread(procs[cid].bootstrap, ids) == ErrorCode.none
    assert eventually(lambda: _leaders(z), lambda led: led == ids, timeout=WAIT_S) == ids
    return procs, ",".join(b.bootstrap for b in procs.values()), txn_id, group, group_leader


def run(everyone: str, txn_id: str, offsets_of: str | None = None) -> None:
    """Commit, abort, commit one record per partition; the last transaction also commits
    offsets 10+i of `offsets_of` when given."""
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": everyone, "transactional.id": txn_id,
                     "linger.ms": 5})
    p.init_transactions(WAIT_S)
    meta = ck.Consumer({"bootstrap.servers": everyone, "group.id": offsets_of or "unused"})
    try:
        for tag, commit in (("a", True), ("x", False), ("b", True)):
            p.begin_transaction()
            for i in range(PARTITIONS):
                p.produce(TOPIC, value=f"{tag}{i}".encode(), partition=i)
            assert p.flush(WAIT_S) == 0  # written, also those aborted
            if tag == "b" and offsets_of is not None:
                p.send_offsets_to_transaction(
                    [ck.TopicPartition(TOPIC, i, 10 + i) for i in range(PARTITIONS)],
                    meta.consumer_group_metadata(), WAIT_S)
            if commit:
                p.commit_transaction(WAIT_S)
            else:
                p.abort_transaction(WAIT_S)
    finally:
        meta.close()


def test_markers_reach_partitions_led_by_other_brokers(brokers, zk):
    procs, everyone, txn_id, _, _ = setup(brokers, zk)
    run(everyone, txn_id)
    committed = sorted(f"{t}{i}".encode() for t in "ab" for i in range(PARTITIONS))
    aborted = [f"x{i}".encode() for i in range(PARTITIONS)]
    assert sorted(consume_all(everyone, TOPIC, "read_committed", len(committed))) == committed
    assert sorted(consume_all(everyone, TOPIC, "read_uncommitted", 3 * PARTITIONS)) == sorted(
        committed + aborted)


def test_offsets_of_a_group_coordinated_elsewhere_are_committed(brokers, zk):
    procs, everyone, txn_id, group, group_leader = setup(brokers, zk)
    run(everyone, txn_id, offsets_of=group)
    want = {i: 10 + i for i in range(PARTITIONS)}
    err, got = eventually(lambda: offset_fetch(procs[group_leader].bootstrap, group, TOPIC,
                                               list(want)),
                          lambda r: r[1] == want, timeout=WAIT_S)
    assert (err, got) == (ErrorCode.none, want)


def _leaders(z) -> list[int | None]:
    """Each partition's leader of TOPIC in ZooKeeper (None before its state exists)."""
    from kafkalite.cluster import zkdata
    out = []
    for i in range(PARTITIONS):
        path = zkdata.partition_state_path(TOPIC, i)
        if z.client.exists(path) is None:
            out.append(None)
            continue
        out.append(zkdata.PartitionState.decode(z.client.get(path)[0]).leader)
    return out


class ScriptedView:
    """The cluster as the sender reads it: `topic`'s partition 0 led by `leader`; node 5 is
    the spawned broker. Asking for a broker that is not live moves the leadership to 5, as
    the view's next state would after a leader's failure."""
    node_id = 9  # this (absent) broker: leads nothing

    def __init__(self, bootstrap: str, topic: str, leader: int):
        host, port = bootstrap.rsplit(":", 1)
        self.node = BrokerNode(5, host, int(port))
        self.topic, self.leader = topic, leader
        self.leaders_seen: list[int] = []

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        if (topic, partition) != (self.topic, 0):
            return None
        self.leaders_seen.append(self.leader)
        return PartitionState(self.leader, 0, (self.leader,), (self.leader,))

    def broker(self, node_id: int, listener) -> BrokerNode | None:
        if node_id == 5:
            return self.node
        self.leader = 5
        return None


def send_marker(view: ScriptedView, topic: str) -> dict:
    async def go() -> dict:
        sender = MarkerSender(SimpleNamespace(node_id=view.node_id), view,
                              {"replica.socket.timeout.ms": 10000})
        try:
            return await sender.write(4242, 0, 0, False, [(topic, 0)])
        finally:
            sender.close()
    return asyncio.run(go())


def test_the_sender_reads_the_leader_again_after_a_failed_round(broker_process):
    topic = f"m-{uuid.uuid4().hex[:6]}"
    create_topic(broker_process.bootstrap, topic)
    view = ScriptedView(broker_process.bootstrap, topic, leader=7)  # 7: not live
    assert send_marker(view, topic) == {(topic, 0): ErrorCode.none}
    assert view.leaders_seen[0] == 7 and view.leaders_seen[-1] == 5
    assert latest(broker_process.bootstrap, topic, committed=False) == 1  # the ABORT marker
    view.leader = NO_NODE  # offline: nothing sent, no request answered
    assert send_marker(view, topic) == {(topic, 0): ErrorCode.leader_not_available}


def test_a_partition_unknown_to_its_leader_is_left_for_the_coordinators_retry(broker_process):
    view = ScriptedView(broker_process.bootstrap, "not-there", leader=5)
    # the leader answers UNKNOWN_TOPIC_OR_PARTITION while the cluster knows the partition:
    # not a deleted one, so not reported as such (the coordinator would drop its marker)
    assert send_marker(view, "not-there") == {("not-there", 0): ErrorCode.not_leader_or_follower}
    assert len(view.leaders_seen) > 2
    # a partition the cluster does not know: deleted, reported so at once
    assert send_marker(view, "gone") == {("gone", 0): ErrorCode.unknown_topic_or_partition}
