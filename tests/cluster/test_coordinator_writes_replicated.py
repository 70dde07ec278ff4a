# The coordinators' own writes wait for the ISR in a ZooKeeper cluster (issue 17), as Kafka's
# appendRecords with requiredAcks=-1: an OffsetCommit is answered once the high watermark of
# the group's __consumer_offsets partition passes the commit, so the committed offsets
# survive the coordinator's broker; below min.insync.replicas nothing is written and the
# committer gets COORDINATOR_NOT_AVAILABLE (GroupMetadataManager.storeOffsets' mapping of
# NOT_ENOUGH_REPLICAS / NOT_ENOUGH_REPLICAS_AFTER_APPEND; running three Kafka brokers in
# ZooKeeper mode for the comparison is not cheap, so the documented mapping is asserted);
# a __transaction_state write below it too (InitProducerId: COORDINATOR_NOT_AVAILABLE, as
# TransactionStateManager.appendTransactionToLog maps it).
from __future__ import annotations

import signal
import uuid

from kafka.protocol import consumer

from kafkalite.cluster import zkdata
from kafkalite.coordinator.offsets_log import partition_for
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (OFFSETS, SETTLING, TRANSACTION, TXN, cluster,
                                               find, found, leader_of, offset_fetch)
from tests.cluster.test_membership import WAIT_S, brokers, connect, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import create
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually
from tests.integration.test_txn_coordinator_wire import Wire

PARTITIONS = 3  # of __consumer_offsets


def offset_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]
                  ) -> dict[int, int]:
    """OffsetCommit v8 of a simple consumer (generation -1): {partition: error code}."""
    R = consumer.OffsetCommitRequest[8]
    T = R.OffsetCommitRequestTopic
    req = R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=[T(name=topic, partitions=[
                T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                               committed_leader_epoch=-1,
                                               committed_metadata="")
                for p, o in offsets.items()])])
    with open_socket(bootstrap) as s:
        resp = call(s, req)
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


def isr(z, key: str, topic: str = OFFSETS) -> tuple[int, list[int]]:
    """(leader, ISR) of the key's partition of `topic` in ZooKeeper."""
    path = zkdata.partition_state_path(topic, partition_for(key, PARTITIONS))
    st = zkdata.PartitionState.decode(z.client.get(path)[0])
    return st.leader, sorted(st.isr)


def replicated_group(brokers, zk, **settings: str):
    """Three brokers, __consumer_offsets with three replicas, topic "t" (three replicas), a
    group whose offsets partition has its full ISR: (procs, kazoo, group, coordinator)."""
    procs, z, cid = cluster(brokers, zk, **{
        "offsets.topic.num.partitions": str(PARTITIONS),
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.num.partitions": str(PARTITIONS),
        "transaction.state.log.replication.factor": "3", **settings})
    assert create(procs[cid].bootstrap, "t", partitions=3, rf=3).error_code == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    err, coordinator = eventually(lambda: find(procs[1].bootstrap, group),
                                  lambda r: r[0] == ErrorCode.none, timeout=WAIT_S)
    assert err == ErrorCode.none
    assert eventually(lambda: isr(z, group)[1], lambda i: i == [1, 2, 3],
                      timeout=WAIT_S) == [1, 2, 3]
    return procs, z, group, coordinator


def test_a_commit_answered_survives_the_coordinators_broker(brokers, zk):
    # Followers get new data only after replica.fetch.wait.max.ms (their fetches ask for more
    # bytes than a commit has): a commit answered at the leader's append alone would be lost
    # by a SIGKILL right after its answer.
    procs, z, group, old = replicated_group(brokers, zk, **{
        "replica.fetch.min.bytes": "1048576", "replica.fetch.wait.max.ms": "2000",
        "replica.lag.time.max.ms": "20000"})
    wanted = {0: 11, 1: 22, 2: 33}
    assert eventually(lambda: offset_commit(procs[old].bootstrap, group, "t", wanted),
                      lambda r: not set(r.values()) & SETTLING,
                      timeout=WAIT_S) == dict.fromkeys(wanted, ErrorCode.none)
    procs[old].kill()
    other = next(b for i, b in procs.items() if i != old)
    err, new = eventually(lambda: find(other.bootstrap, group),
                          lambda r: r[0] == ErrorCode.none and r[1] != old, timeout=WAIT_S)
    assert err == ErrorCode.none and new != old
    assert eventually(lambda: offset_fetch(procs[new].bootstrap, group, "t", [0, 1, 2]),
                      lambda r: r[0] not in SETTLING, timeout=WAIT_S) == (ErrorCode.none,
                                                                          wanted)


def test_below_min_insync_replicas_a_commit_is_refused(brokers, zk):
    procs, z, group, coordinator = replicated_group(brokers, zk, **{
        # __transaction_state takes its own, as Kafka's: transaction.state.log.min.isr
        "min.insync.replicas": "2", "transaction.state.log.min.isr": "2",
        "replica.lag.time.max.ms": "1500",
        "offsets.commit.timeout.ms": "3000"})
    assert offset_commit(procs[coordinator].bootstrap, group, "t", {0: 5}) == {
        0: ErrorCode.none}
    # a transactional id coordinated by the same broker, its partition's ISR full
    found(procs[coordinator].bootstrap, "any", TRANSACTION)  # creates __transaction_state
    txn_ids = [f"tx-{i}" for i in range(30)]
    eventually(lambda: [leader_of(z, TXN, t) for t in txn_ids], lambda r: None not in r,
               timeout=WAIT_S)
    txn_id = next(t for t in txn_ids if leader_of(z, TXN, t)[0] == coordinator)
    assert eventually(lambda: isr(z, txn_id, TXN)[1], lambda i: i == [1, 2, 3],
                      timeout=WAIT_S) == [1, 2, 3]
    stopped = [b for i, b in procs.items() if i != coordinator]
    for b in stopped:
        b.proc.send_signal(signal.SIGSTOP)
    try:
        # written while the stopped followers are still in the ISR: the HW cannot pass it,
        # the committer is told so (REQUEST_TIMED_OUT after offsets.commit.timeout.ms, or
        # COORDINATOR_NOT_AVAILABLE once the ISR is below min.insync.replicas) and the
        # offset is not visible
        (err,) = offset_commit(procs[coordinator].bootstrap, group, "t", {0: 6}).values()
        assert err in (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available)
        assert offset_fetch(procs[coordinator].bootstrap, group, "t", [0]) == (
            ErrorCode.none, {0: 5})
        # the ISR shrinks to the coordinator alone (its own check, or the controller's
        # removal of the expired brokers): one replica of the two required
        assert eventually(lambda: isr(z, group), lambda s: s == (coordinator, [coordinator]),
                          timeout=WAIT_S) == (coordinator, [coordinator])
        assert offset_commit(procs[coordinator].bootstrap, group, "t", {0: 7, 1: 8}) == {
            0: ErrorCode.coordinator_not_available, 1: ErrorCode.coordinator_not_available}
        # nothing of the refused commit was stored
        assert offset_fetch(procs[coordinator].bootstrap, group, "t", [0, 1]) == (
            ErrorCode.none, {0: 5, 1: -1})
        # __transaction_state: COORDINATOR_NOT_AVAILABLE (TransactionStateManager's mapping)
        assert eventually(lambda: isr(z, txn_id, TXN), lambda s: s[1] == [coordinator],
                          timeout=WAIT_S) == (coordinator, [coordinator])
        w = Wire(procs[coordinator].bootstrap)
        try:
            assert w.init(txn_id).error_code == ErrorCode.coordinator_not_available
        finally:
            w.close()
    finally:
        for b in stopped:
            b.proc.send_signal(signal.SIGCONT)
    # the followers back in the ISR: commits are taken again
    assert eventually(lambda: offset_commit(procs[coordinator].bootstrap, group, "t", {0: 9}),
                      lambda r: r == {0: ErrorCode.none}, timeout=WAIT_S) == {
        0: ErrorCode.none}
