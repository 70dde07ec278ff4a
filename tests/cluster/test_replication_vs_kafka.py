# Replication against the reference: the same failure scenario on three kafkalite brokers and
# on three Apache Kafka 3.8.0 brokers in ZooKeeper mode (each cluster on its own chroot of the
# session ZooKeeper). An RF=3 topic with min.insync.replicas=2; both followers SIGSTOPped
# while the leader takes acks=1 writes; the ISR shrinks to the leader; acks=all is refused;
# the followers resume and rejoin; then the leader stops and another takes over, and
# ListOffsets answers with its leader epochs. What clients and ZooKeeper show must be the same.
from __future__ import annotations

import signal

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import ListOffsetsRequest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_zk_admin_apis import controller_id, states
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call, fetch_raw, produce_raw, simple_batch
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

TOPIC = "replicated"
SETTINGS = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "20000"}


def create_led(bootstrap: str, replicas: list[int]):
    """TOPIC with one partition on `replicas` (the first leads), min.insync.replicas=2."""
    T = CreateTopicsRequest[7].CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=TOPIC, num_partitions=-1, replication_factor=-1, assignments=[
            T.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[T.CreatableTopicConfig(name="min.insync.replicas", value="2")])],
        timeout_ms=15000, validate_only=False)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row


def scenario(procs: dict, z: Zk) -> list:
    """What the scenario shows, step by step, as comparable values."""
    seen: list = []
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    # the controller leads (first replica): the followers stopped below are not the one
    # Kafka's leader asks for ISR changes (AlterPartition)
    replicas = [cid, *(i for i in procs if i != cid)]
    row = eventually(lambda: create_led(procs[cid].bootstrap, replicas),
                     lambda r: r.error_code in (0, ErrorCode.topic_already_exists),
                     timeout=WAIT_S)
    assert row.error_code in (0, ErrorCode.topic_already_exists)
    first = eventually(lambda: states(z, TOPIC, [0]).get(0),
                       lambda s: s is not None and len(s.isr) == 3, timeout=WAIT_S)
    seen.append(("isr at creation", len(first.isr), first.leader_epoch))
    lead = procs[first.leader]
    followers = [b for i, b in procs.items() if i != first.leader]
    with open_socket(lead.bootstrap, timeout=30) as s:
        eventually(lambda: fetch_raw(s, TOPIC, 0, 0).error_code, lambda c: c == 0,
                   timeout=WAIT_S)
        code = eventually(lambda: produce_raw(s, TOPIC, 0, simple_batch(1)).error_code,
                          lambda c: c == 0, timeout=WAIT_S)
        seen.append(("acks=all, all in sync", code))
        for b in followers:
            b.proc.send_signal(signal.SIGSTOP)
        try:
            seen.append(("acks=1, followers stopped",
                         produce_raw(s, TOPIC, 0, simple_batch(2), acks=1).error_code))
            shrunk = eventually(lambda: states(z, TOPIC, [0])[0],
                                lambda st: st.isr == (first.leader,), timeout=WAIT_S)
            seen.append(("isr shrunk by the leader", shrunk.isr == (first.leader,),
                         shrunk.leader == first.leader,
                         shrunk.leader_epoch - first.leader_epoch))
            # Kafka's leader may take one more acks=all write (answered REQUEST_TIMED_OUT:
            # its HW stays below min.insync.replicas) until the controller confirms the ISR
            seen.append(("acks=all below min.insync.replicas", eventually(
                lambda: produce_raw(s, TOPIC, 0, simple_batch(1)).error_code,
                lambda c: c != ErrorCode.request_timed_out, timeout=WAIT_S)))
            part = fetch_raw(s, TOPIC, 0, 0)
            seen.append(("consumer HW with the ISR of one", part.high_watermark))
        finally:
            for b in followers:
                b.proc.send_signal(signal.SIGCONT)
        back = eventually(lambda: states(z, TOPIC, [0])[0], lambda st: len(st.isr) == 3,
                          timeout=WAIT_S)
        seen.append(("isr rejoined", len(back.isr), back.leader == first.leader,
                     back.leader_epoch - first.leader_epoch))
        seen.append(("acks=all after the rejoin",
                     produce_raw(s, TOPIC, 0, simple_batch(1)).error_code))
    notes = eventually(lambda: notifications(z), lambda n: not n, timeout=WAIT_S)
    seen.append(("isr_change notifications left", len(notes)))
    # a leader change (the leader stops cleanly: controlled shutdown moves it): the new
    # leader answers ListOffsets with Kafka's epochs (latest: the current leader epoch; a
    # lookup: the epoch the found record was written in)
    lead.stop()
    moved = eventually(lambda: states(z, TOPIC, [0])[0],
                       lambda st: st.leader not in (first.leader, -1), timeout=WAIT_S)
    seen.append(("leader moved", moved.leader_epoch - first.leader_epoch, len(moved.isr)))
    new = procs[moved.leader]
    with open_socket(new.bootstrap, timeout=30) as s:
        seen.append(("acks=all on the new leader", eventually(
            lambda: produce_raw(s, TOPIC, 0, simple_batch(1)).error_code,
            lambda c: c == 0, timeout=WAIT_S)))
    # (how many records the leader took while the ISR was short varies with timing: Kafka's
    # leader appends an acks=all write it then answers REQUEST_TIMED_OUT; so the end offset
    # itself is not compared, only where the lookups land relative to it)
    epoch0 = first.leader_epoch
    end = list_offsets(new.bootstrap, -1)
    for label, ts, relative in (("earliest", -2, False), ("latest", -1, True),
                                ("timestamp 0", 0, False), ("max timestamp", -3, True)):
        code, offset, epoch = list_offsets(new.bootstrap, ts)
        seen.append((f"list offsets {label}", code, offset - end[1] if relative else offset,
                     epoch - epoch0))
    return seen


def notifications(z: Zk) -> list[str]:
    return z.client.get_children(zkdata.ISR_CHANGE_NOTIFICATION) \
        if z.client.exists(zkdata.ISR_CHANGE_NOTIFICATION) else []


def list_offsets(bootstrap: str, timestamp: int) -> tuple[int, int, int]:
    """ListOffsets v7 of TOPIC-0 at `timestamp`: (error, offset, leader epoch)."""
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=TOPIC, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                               timestamp=timestamp)])])
    req.API_VERSION = 7
    with open_socket(bootstrap) as s:
        p = call(s, req).topics[0].partitions[0]
    return p.error_code, p.offset, p.leader_epoch


@pytest.fixture
def kafka_cluster(zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (1, 2, 3), {
            **SETTINGS, "auto.leader.rebalance.enable": "false",
            "offsets.topic.replication.factor": "3"}) as (connect, made):
        z = Zk(connect)
        try:
            yield made, z
        finally:
            z.close()


def test_isr_shrink_min_insync_and_rejoin_as_kafka(brokers, zk, kafka_cluster):
    kafka_procs, kafka_z = kafka_cluster
    expected = scenario(kafka_procs, kafka_z)
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS)))
    z = zk()
    registered(z, {1, 2, 3})
    got = scenario(procs, z)
    # Kafka 3.8's leader asks the controller (AlterPartition), which writes the ISR;
    # kafkalite's leader writes the znode itself (Kafka before 2.7) and announces it under
    # /isr_change_notification, which its controller consumes: none is left on either side.
    assert got == expected
