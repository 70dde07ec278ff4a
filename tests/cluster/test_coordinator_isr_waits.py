# The coordinators' group metadata and transaction markers wait for the ISR in a ZooKeeper
# cluster (issue 17), as Kafka 3.8's: the leader's SyncGroup assignment (the GroupMetadata
# record) is an acks=-1 append to __consumer_offsets, answered with GroupMetadataManager.
# storeGroup's mapping when the ISR does not take it (NOT_ENOUGH_REPLICAS(_AFTER_APPEND) ->
# COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT -> REBALANCE_IN_PROGRESS); a transaction's
# COMMIT markers are acks=-1 appends on each partition's leader (this broker's own or another's
# by WriteTxnMarkers), and the coordinator writes CompleteCommit only once every marker is
# replicated. The followers are SIGSTOPped; running three Kafka brokers in ZooKeeper mode for
# the comparison is not cheap, so Kafka's documented answers are asserted. Compared with
# one Kafka 3.8 broker in ZooKeeper mode: the topic configs of __transaction_state
# (min.insync.replicas from transaction.state.log.min.isr), and the default replication factor
# of the internal topics (3, as Kafka's): a lone broker answers COORDINATOR_NOT_AVAILABLE.
from __future__ import annotations

import signal
import uuid

from kafka.protocol import consumer
from kafka.protocol.admin import CreateTopicsRequest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (GROUP, OFFSETS, SETTLING, TRANSACTION, TXN,
                                               cluster, find, found, leader_of, lone_kafkalite)
from tests.cluster.test_coordinator_writes_replicated import isr, replicated_group
from tests.cluster.test_membership import WAIT_S, Zk, brokers, connect, zk  # noqa: F401
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually
from tests.integration.test_txn_coordinator_wire import Wire, errors_v3

NO_ISR = (ErrorCode.coordinator_not_available, ErrorCode.rebalance_in_progress)


class Member:
    """The only member (so the leader) of its group, over raw JoinGroup v5 / SyncGroup v3,
    keeping its member id across rebalances."""

    def __init__(self, bootstrap: str, group: str):
        self.bootstrap, self.group, self.member_id = bootstrap, group, ""

    def join(self, sock) -> tuple[int, int]:
        R = consumer.JoinGroupRequest[5]
        resp = call(sock, R(group_id=self.group, session_timeout_ms=15000,
                            rebalance_timeout_ms=15000, member_id=self.member_id,
                            group_instance_id=None, protocol_type="consumer",
                            protocols=[R.JoinGroupRequestProtocol(name="range",
                                                                  metadata=b"")]))
        if resp.member_id:
            self.member_id = resp.member_id
        return resp.error_code, resp.generation_id

    def join_and_sync(self) -> tuple[int, int]:
        """(join error, sync error) of a rebalance assigning itself."""
        S = consumer.SyncGroupRequest[3]
        with open_socket(self.bootstrap, timeout=WAIT_S) as s:
            err, generation = self.join(s)
            if err == ErrorCode.member_id_required:
                err, generation = self.join(s)
            if err:
                return err, -1
            sync = call(s, S(group_id=self.group, generation_id=generation,
                             member_id=self.member_id, group_instance_id=None,
                             assignments=[S.SyncGroupRequestAssignment(
                                 member_id=self.member_id, assignment=b"assigned")]))
        return err, sync.error_code


def stopped(procs: dict, ids) -> None:
    for i in ids:
        procs[i].proc.send_signal(signal.SIGSTOP)


def resumed(procs: dict, ids) -> None:
    for i in ids:
        procs[i].proc.send_signal(signal.SIGCONT)


def test_sync_group_waits_for_the_isr(brokers, zk):
    procs, z, group, coordinator = replicated_group(brokers, zk, **{
        "min.insync.replicas": "2", "replica.lag.time.max.ms": "1500",
        "offsets.commit.timeout.ms": "3000", "group.initial.rebalance.delay.ms": "0"})
    member = Member(procs[coordinator].bootstrap, group)
    assert eventually(member.join_and_sync, lambda r: r[0] not in SETTLING,
                      timeout=WAIT_S) == (ErrorCode.none, ErrorCode.none)
    followers = [i for i in procs if i != coordinator]
    stopped(procs, followers)
    try:
        # the assignment written while the stopped followers are still in the ISR: its
        # answer waits, then REBALANCE_IN_PROGRESS (timed out) or COORDINATOR_NOT_AVAILABLE
        # (the ISR shrank below min.insync.replicas after the append), never NONE
        join_err, sync_err = member.join_and_sync()
        assert join_err == ErrorCode.none and sync_err in NO_ISR
        assert eventually(lambda: isr(z, group), lambda s: s == (coordinator, [coordinator]),
                          timeout=WAIT_S) == (coordinator, [coordinator])
        # below min.insync.replicas nothing is appended: COORDINATOR_NOT_AVAILABLE
        assert member.join_and_sync() == (ErrorCode.none, ErrorCode.coordinator_not_available)
    finally:
        resumed(procs, followers)
    assert eventually(member.join_and_sync, lambda r: r == (ErrorCode.none, ErrorCode.none),
                      timeout=WAIT_S) == (ErrorCode.none, ErrorCode.none)


def create_assigned(bootstrap: str, name: str, replicas: list[list[int]],
                    configs: dict[str, str]) -> int:
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=name, num_partitions=-1, replication_factor=-1,
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
        assignments=[T.CreatableReplicaAssignment(partition_index=i, broker_ids=r)
                     for i, r in enumerate(replicas)])], timeout_ms=15000, validate_only=False)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row.error_code


def partition_isr(z, topic: str, partition: int) -> tuple[int, list[int]] | None:
    path = zkdata.partition_state_path(topic, partition)
    if z.client.exists(path) is None:
        return None
    st = zkdata.PartitionState.decode(z.client.get(path)[0])
    return st.leader, sorted(st.isr)


def write_marker(bootstrap: str, topic: str, partition: int) -> int:
    """An admin's ABORT marker (WriteTxnMarkers v1) of an unknown producer: its error."""
    w = Wire(bootstrap)
    try:
        m = w.mod(27, 1)
        resp = w.call(27, 1, markers=(m.WritableTxnMarker(
            producer_id=987654, producer_epoch=0, transaction_result=False,
            coordinator_epoch=0, topics=(m.WritableTxnMarkerTopic(
                name=topic, partition_indexes=(partition,)),)),))
    finally:
        w.close()
    return resp.markers[0].topics[0].partitions[0].error_code


def test_a_commit_completes_once_its_markers_are_replicated(brokers, zk):
    procs, z, cid = cluster(brokers, zk, **{
        "transaction.state.log.num.partitions": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2", "replica.lag.time.max.ms": "1500",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    found(procs[1].bootstrap, "any", TRANSACTION)  # creates __transaction_state
    txn_ids = [f"tx-{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
    leaders = eventually(lambda: [leader_of(z, TXN, t) for t in txn_ids],
                         lambda r: None not in r, timeout=WAIT_S)
    txn, (coordinator, _) = txn_ids[0], leaders[0]
    other, follower = [i for i in procs if i != coordinator]
    # d-0 led by the coordinator (its local marker path), d-1 by another broker
    # (WriteTxnMarkers); the stopped follower holds a replica of both
    assert create_assigned(procs[cid].bootstrap, "d",
                           [[coordinator, follower], [other, follower]],
                           {"min.insync.replicas": "2"}) == ErrorCode.none
    assert eventually(lambda: [partition_isr(z, "d", p) for p in (0, 1)],
                      lambda r: r == [(coordinator, sorted([coordinator, follower])),
                                      (other, sorted([other, follower]))],
                      timeout=WAIT_S)[0] is not None
    w = Wire(procs[coordinator].bootstrap)
    w.sock.settimeout(WAIT_S)  # EndTxn waits for the markers' first rounds
    try:
        init = eventually(lambda: w.init(txn), lambda r: r.error_code not in SETTLING,
                          timeout=WAIT_S)
        assert init.error_code == ErrorCode.none
        pid, epoch = init.producer_id, init.producer_epoch
        assert set(errors_v3(w.add(txn, pid, epoch, {"d": [0, 1]})).values()) == {
            ErrorCode.none}
        stopped(procs, [follower])
        try:
            # answered once PrepareCommit is written (the ISR of __transaction_state keeps
            # two brokers); the markers cannot reach the ISR of d
            assert w.end(txn, pid, epoch, True) == ErrorCode.none
            assert w.describe(txn).transaction_state == "PrepareCommit"
            assert eventually(lambda: [partition_isr(z, "d", p) for p in (0, 1)],
                              lambda r: r == [(coordinator, [coordinator]), (other, [other])],
                              timeout=WAIT_S)[1] == (other, [other])
            # the leaders refuse a marker below min.insync.replicas, the remote one too
            assert eventually(lambda: write_marker(procs[other].bootstrap, "d", 1),
                              lambda e: e == ErrorCode.not_enough_replicas,
                              timeout=WAIT_S) == ErrorCode.not_enough_replicas
            assert w.describe(txn).transaction_state == "PrepareCommit"
        finally:
            resumed(procs, [follower])
        assert eventually(lambda: w.describe(txn).transaction_state,
                          lambda s: s == "CompleteCommit", timeout=WAIT_S) == "CompleteCommit"
    finally:
        w.close()


def txn_topic_configs(connect: str) -> dict:
    z = Zk(connect)
    try:
        path = zkdata.topic_config_path(TXN)
        eventually(lambda: z.client.exists(path), lambda st: st is not None, timeout=WAIT_S)
        configs = zkdata.decode_topic_config(z.client.get(path)[0])
    finally:
        z.close()
    return configs


def test_transaction_state_min_isr_as_kafka(zookeeper):
    settings = {"transaction.state.log.num.partitions": "2",
                "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1"}
    with zkh.kafka_on_zookeeper(zookeeper, (1,), settings) as (connect, made):
        found(made[1].bootstrap, "t", TRANSACTION)
        theirs = txn_topic_configs(connect)
    with lone_kafkalite(zookeeper, settings) as (connect, bootstrap):
        find(bootstrap, "t", TRANSACTION)
        ours = txn_topic_configs(connect)
    assert ours == theirs
    assert theirs["min.insync.replicas"] == "1"


def coordinators_of_a_lone_broker(connect: str, bootstrap: str) -> list:
    z = Zk(connect)
    try:
        out: list = [find(bootstrap, key, kind) for key, kind in (
            ("g", GROUP), ("t", TRANSACTION), ("g", GROUP), ("t", TRANSACTION))]
        out.append([t for t in (OFFSETS, TXN)
                    if z.client.exists(zkdata.topic_path(t)) is not None])
    finally:
        z.close()
    return out


def test_default_internal_replication_needs_three_brokers_as_kafka(zookeeper):
    # Kafka's defaults: offsets.topic.replication.factor=3, transaction.state.log.
    # replication.factor=3 and min.isr=2 (given to Kafka explicitly, as its test helper sets
    # one replica; kafkalite gets nothing): a lone broker writes no internal topic and
    # answers COORDINATOR_NOT_AVAILABLE
    small = {"offsets.topic.num.partitions": "2", "transaction.state.log.num.partitions": "2"}
    kafka_defaults = {"offsets.topic.replication.factor": "3",
                      "transaction.state.log.replication.factor": "3",
                      "transaction.state.log.min.isr": "2"}
    with zkh.kafka_on_zookeeper(zookeeper, (1,), {**small, **kafka_defaults}) as (
            connect, made):
        theirs = coordinators_of_a_lone_broker(connect, made[1].bootstrap)
    with lone_kafkalite(zookeeper, small) as (connect, bootstrap):
        ours = coordinators_of_a_lone_broker(connect, bootstrap)
    assert ours == theirs
    assert theirs[0] == (ErrorCode.coordinator_not_available, -1) and theirs[-1] == []
