# KIP-890 part 1 verification with the transaction coordinator on another broker (issue 17,
# cluster/txn_verifier.py): 3 brokers on ZooKeeper, a transactional id coordinated on broker A,
# a partition led by broker B != A and a group coordinated by broker G != A. Raw requests:
# a transactional batch produced to B before AddPartitionsToTxn is refused (B asked A with
# AddPartitionsToTxn v4 verify_only) and nothing is appended; with another epoch it is
# INVALID_PRODUCER_EPOCH; once A added the partition it is appended. TxnOffsetCommit to G before
# AddOffsetsToTxn is refused the same way (v3 INVALID_TXN_STATE, v4 as Kafka answers it), and
# accepted after. The same requests to A itself (its partition, a group it coordinates) are
# answered alike. The same scenario on 3 Apache Kafka 3.8 brokers in ZooKeeper mode must give
# the same answers. confluent-kafka across the brokers: test_txn_markers_remote.py.
from __future__ import annotations

import datetime
import uuid

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalite.wire.errors import ErrorCode
from tests.cluster.coordinator_helpers import (GROUP, OFFSETS, TRANSACTION, TXN, cluster,
                                               find, leader_of)
from tests.cluster.test_membership import WAIT_S, Zk, brokers, connect, zk  # noqa: F401
from tests.cluster.test_txn_markers_remote import SETTINGS, TOPIC, create_spread
from tests.helpers import zookeeper as zkh
from tests.helpers.real_kafka import eventually
from tests.integration.test_txn_coordinator_wire import Wire

MS = datetime.timedelta(milliseconds=1)
SETTLING = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
            ErrorCode.not_coordinator, ErrorCode.concurrent_transactions}


def txn_batch(pid: int, epoch: int, seq: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 20)
    b.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    return bytes(b.build())


def produce(w: Wire, txn: str, idx: int, batch: bytes, version: int) -> int:
    m = w.mod(0, version)
    r = w.call(0, version, transactional_id=txn, acks=-1, timeout=5000 * MS, topic_data=(
        m.TopicProduceData(name=TOPIC, partition_data=(m.PartitionProduceData(
            index=idx, records=batch),)),))
    return r.responses[0].partition_responses[0].error_code


def end_offset(w: Wire, idx: int) -> int:
    m = w.mod(2, 5)
    r = w.call(2, 5, replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
        name=TOPIC, partitions=(m.ListOffsetsPartition(
            partition_index=idx, current_leader_epoch=-1, timestamp=-1),)),))
    return r.topics[0].partitions[0].offset


def txn_offset_commit(w: Wire, txn: str, group: str, pid: int, epoch: int, version: int) -> int:
    m = w.mod(28, version)
    r = w.call(28, version, transactional_id=txn, group_id=group, producer_id=pid,
               producer_epoch=epoch, topics=(m.TxnOffsetCommitRequestTopic(
                   name=TOPIC, partitions=(m.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=7, committed_metadata=""),)),))
    return r.topics[0].partitions[0].error_code


def settled(fn):
    """fn() once it answers something else than "the coordinator is not ready" (bounded)."""
    return eventually(fn, lambda e: e not in SETTLING, timeout=WAIT_S * 2, interval=0.3)


def scenario(connect: str, boot: dict[int, str]) -> list:
    """The answers of the steps above on the cluster `boot` ({id: bootstrap}) on ZooKeeper
    `connect`: raw answer codes and offsets, in order."""
    ids = sorted(boot)
    z = Zk(connect)
    any_boot = boot[ids[0]]
    wires: dict[int, Wire] = {}
    try:
        assert create_spread(any_boot, ids) == ErrorCode.none
        txn = f"tx-{uuid.uuid4().hex[:8]}"
        eventually(lambda: find(any_boot, txn, TRANSACTION), lambda r: r[0] == 0,
                   timeout=WAIT_S * 2, interval=0.3)
        coord, _ = eventually(lambda: leader_of(z, TXN, txn), lambda r: r is not None,
                              timeout=WAIT_S)
        b_id = next(i for i in ids if i != coord)
        idx = ids.index(b_id)  # TOPIC's partition led by b_id (create_spread)
        eventually(lambda: find(any_boot, "probe", GROUP), lambda r: r[0] == 0,
                   timeout=WAIT_S * 2, interval=0.3)
        group = next(g for g in (f"g-{i}-{txn}" for i in range(200))
                     if (led := leader_of(z, OFFSETS, g)) is not None and led[0] != coord)
        g_id = leader_of(z, OFFSETS, group)[0]
        local_group = next(g for g in (f"l-{i}-{txn}" for i in range(200))
                           if (led := leader_of(z, OFFSETS, g)) is not None and led[0] == coord)
        wires = {i: Wire(b) for i, b in boot.items()}
        init = eventually(lambda: wires[coord].init(txn),
                          lambda r: r.error_code not in SETTLING, timeout=WAIT_S * 2)
        assert init.error_code == ErrorCode.none, init
        pid, epoch = init.producer_id, init.producer_epoch
        leader = wires[b_id]
        eventually(lambda: end_offset(leader, idx), lambda o: o == 0, timeout=WAIT_S)
        out: list = []
        for version in (9, 11):  # before Produce v11 TRANSACTION_ABORTABLE was unknown
            out.append(("produce before add", version, settled(
                lambda: produce(leader, txn, idx, txn_batch(pid, epoch), version))))
        for version in (9, 11):  # the coordinator's own partition: asked locally, alike
            out.append(("local produce before add", version, settled(lambda: produce(
                wires[coord], txn, ids.index(coord), txn_batch(pid, epoch), version))))
        out.append(("produce, other epoch", settled(
            lambda: produce(leader, txn, idx, txn_batch(pid, epoch + 1), 9))))
        out.append(("end offset", end_offset(leader, idx)))
        for version in (3, 4):
            out.append(("offsets before add", version, settled(
                lambda: txn_offset_commit(wires[g_id], txn, group, pid, epoch, version))))
        for version in (3, 4):
            out.append(("local offsets before add", version, settled(lambda: txn_offset_commit(
                wires[coord], txn, local_group, pid, epoch, version))))
        add = wires[coord].add(txn, pid, epoch, {TOPIC: [idx]})
        out.append(("add", add.results_by_topic_v3_and_below[0].results_by_partition[0]
                    .partition_error_code))
        out.append(("produce after add", produce(leader, txn, idx, txn_batch(pid, epoch), 9)))
        out.append(("end offset", end_offset(leader, idx)))
        out.append(("add offsets", wires[coord].call(
            25, 3, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
            group_id=group).error_code))
        out.append(("offsets after add", settled(
            lambda: txn_offset_commit(wires[g_id], txn, group, pid, epoch, 3))))
        out.append(("commit", wires[coord].end(txn, pid, epoch, True)))
        return out
    finally:
        for w in wires.values():
            w.close()
        z.close()


def check(answers: list) -> None:
    """What the scenario must show whatever the broker (not the codes Kafka chose)."""
    got = {a[:-1]: a[-1] for a in answers if a[0] != "end offset"}
    ends = [a[1] for a in answers if a[0] == "end offset"]
    assert got[("produce before add", 9)] == ErrorCode.invalid_txn_state
    assert got[("produce before add", 11)] != ErrorCode.none
    assert all(got[("local " + what, v)] == got[(what, v)] for what, versions in (
        ("produce before add", (9, 11)), ("offsets before add", (3, 4))) for v in versions)
    assert got[("produce, other epoch",)] == ErrorCode.invalid_producer_epoch
    assert got[("offsets before add", 3)] == ErrorCode.invalid_txn_state
    assert got[("offsets before add", 4)] != ErrorCode.none
    assert ends == [0, 1]  # nothing appended before AddPartitionsToTxn, the batch after
    assert got[("produce after add",)] == got[("offsets after add",)] == ErrorCode.none


def _kafkalite(brokers, zk, connect: str) -> list:  # noqa: F811
    procs, _, _ = cluster(brokers, zk, **SETTINGS)
    return scenario(connect, {i: p.bootstrap for i, p in procs.items()})


def test_verification_asks_the_coordinator_on_another_broker(brokers, zk,  # noqa: F811
                                                               connect):  # noqa: F811
    check(_kafkalite(brokers, zk, connect))


def test_the_answers_match_kafka_in_zookeeper_mode(brokers, zk, connect,  # noqa: F811
                                                   zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (1, 2, 3), SETTINGS) as (kconnect, kafka):
        expected = scenario(kconnect, {i: b.bootstrap for i, b in kafka.items()})
    check(expected)
    assert _kafkalite(brokers, zk, connect) == expected
