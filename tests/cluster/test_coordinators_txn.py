# The transaction coordinator in a ZooKeeper cluster (issue 17, design step 8): the first
# FindCoordinator for a transactional id writes __transaction_state to ZooKeeper; every broker
# names the leader of the id's partition; a confluent-kafka transactional producer commits and
# aborts through it, and read_committed consumers see only what was committed. The data
# partition is led by another broker than the coordinator's: its markers go there by
# WriteTxnMarkers (test_txn_markers_remote.py covers partitions on every broker).
from __future__ import annotations

import time
import uuid

from kafka.protocol.admin import CreateTopicsRequest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import TRANSACTION, TXN, cluster, find, found, leader_of
from tests.cluster.test_membership import WAIT_S, brokers, connect, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import assignment
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

SETTINGS = {"transaction.state.log.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "offsets.topic.num.partitions": "3"}


def create_on(bootstrap: str, name: str, broker_id: int) -> int:
    """A one-partition topic whose only replica is `broker_id` (CreateTopics v7)."""
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=name, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=[broker_id])])],
        timeout_ms=15000, validate_only=False)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row.error_code


def consume_all(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": isolation})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(got) < expected:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        end = time.monotonic() + 1.0  # nothing more arrives
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_a_transactional_producer_commits_in_the_cluster(brokers, zk):
    import confluent_kafka as ck
    procs, z, cid = cluster(brokers, zk, **SETTINGS)
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    first, _ = find(procs[2].bootstrap, txn_id, TRANSACTION)
    assert first == ErrorCode.coordinator_not_available  # as Kafka: the topic is only now written
    a = eventually(lambda: assignment(z, TXN), lambda a: a is not None, timeout=WAIT_S)
    assert sorted(a.partitions) == [0, 1, 2] and {len(r) for r in a.partitions.values()} == {1}
    configs = zkdata.decode_topic_config(z.client.get(zkdata.topic_config_path(TXN))[0])
    assert configs["cleanup.policy"] == "compact"
    coordinators = {found(b.bootstrap, txn_id, TRANSACTION) for b in procs.values()}
    leader, _ = leader_of(z, TXN, txn_id)
    assert coordinators == {leader}
    elsewhere = next(i for i in sorted(procs) if i != leader)
    assert create_on(procs[cid].bootstrap, "payments", elsewhere) == ErrorCode.none
    everyone = ",".join(b.bootstrap for b in procs.values())
    p = ck.Producer({"bootstrap.servers": everyone, "transactional.id": txn_id,
                     "linger.ms": 5})
    p.init_transactions(WAIT_S)
    for batch, commit in (([b"a1", b"a2", b"a3"], True), ([b"x1", b"x2"], False),
                          ([b"b1"], True)):
        p.begin_transaction()
        for v in batch:
            p.produce("payments", value=v, partition=0)
        assert p.flush(WAIT_S) == 0  # written, also those aborted
        if commit:
            p.commit_transaction(WAIT_S)
        else:
            p.abort_transaction(WAIT_S)
    assert sorted(consume_all(everyone, "payments", "read_committed", 4)) == [
        b"a1", b"a2", b"a3", b"b1"]
    assert sorted(consume_all(everyone, "payments", "read_uncommitted", 6)) == [
        b"a1", b"a2", b"a3", b"b1", b"x1", b"x2"]
    # the other brokers do not hold the id: NOT_COORDINATOR, as Kafka
    other = next(b for i, b in procs.items() if i != leader)
    from tests.integration.test_txn_coordinator_wire import Wire
    w = Wire(other.bootstrap)
    try:
        assert w.describe(txn_id).error_code == ErrorCode.not_coordinator
    finally:
        w.close()
    w = Wire(procs[leader].bootstrap)
    try:
        d = w.describe(txn_id)
        assert (d.error_code, d.transaction_state) == (ErrorCode.none, "CompleteCommit")
    finally:
        w.close()
