# The broker's side of a ZooKeeper-coordinated cluster (issue 17, design steps 3 and 5):
# spawned kafkalite brokers on a chroot of their own read brokers, controller, topic
# assignments and partition states from ZooKeeper and answer Metadata and DescribeCluster from
# them, and serve Produce, Fetch, ListOffsets and OffsetForLeaderEpoch only as the partition's
# leader at its leader epoch. The controller is not part of this step: the test writes
# /controller, the assignments and the partition states with kazoo in Kafka's encodings
# (zkdata), as Kafka's controller would.
from __future__ import annotations

import glob
import os
import uuid

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest

from kafkalite.cluster import zkdata
from kafkalite.log.datadir import uuid_b64
from kafkalite.testing import BrokerProcess
from tests.cluster.test_membership import (  # noqa: F401 (fixtures)
    CONNECT_MS, SESSION_MS, WAIT_S, Zk, brokers, connect, registered, zk)
from tests.helpers import kclients
from tests.helpers.kbatch import call, connect as kconnect, fetch_raw, produce_raw, simple_batch
from tests.helpers.real_kafka import eventually, free_port_pair

NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER = 0, 3, 5, 6
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
CONTROLLER_EPOCH = 1


@pytest.fixture
def cluster(brokers, zk):
    """Brokers 1, 2, 3, registered, and a kazoo session on their chroot; afterwards no broker
    has logged a traceback."""
    b = brokers(1, 2, 3, **{"kafkalite.controller.enable": "false"})  # the test is controller
    z = zk()
    registered(z, {1, 2, 3})
    yield b, z
    for broker in b:
        assert "Traceback" not in broker.read_log(), broker.read_log()[-3000:]


def create_topic(z: Zk, name: str, replicas: dict[int, list[int]],
                 leaders: dict[int, int] | None = None, epoch: int = 0) -> None:
    """The assignment znode, then each partition's state (leader: the first replica unless
    `leaders` says otherwise; ISR: the replicas), in that order, as Kafka's controller."""
    assignment = zkdata.TopicAssignment({p: tuple(r) for p, r in replicas.items()},
                                        uuid_b64(uuid.uuid4()))
    z.client.create(zkdata.topic_path(name), assignment.encode(), makepath=True)
    for p, r in replicas.items():
        set_state(z, name, p, (leaders or {}).get(p, r[0]), epoch, r)


def set_state(z: Zk, topic: str, partition: int, leader: int, epoch: int,
              isr: list[int]) -> None:
    data = zkdata.PartitionState(leader, epoch, tuple(isr), CONTROLLER_EPOCH).encode()
    path = zkdata.partition_state_path(topic, partition)
    if z.client.exists(path):
        z.client.set(path, data)
    else:
        z.client.create(path, data, makepath=True)


def metadata(bootstrap: str, topics: list[str] | None = None, version: int = 12):
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=None if topics is None else [T(name=t) for t in topics],
                          allow_auto_topic_creation=False)
    req.API_VERSION = version
    with kconnect(bootstrap) as s:
        return call(s, req)


def describe_cluster(bootstrap: str):
    req = DescribeClusterRequest(include_cluster_authorized_operations=False)
    req.API_VERSION = 1
    with kconnect(bootstrap) as s:
        return call(s, req)


def partitions(resp, topic: str) -> dict[int, tuple]:
    """partition -> (error, leader, leader epoch, replicas, isr, offline)"""
    t = next(t for t in resp.topics if t.name == topic)
    return {p.partition_index: (p.error_code, p.leader_id, p.leader_epoch,
                                list(p.replica_nodes), list(p.isr_nodes),
                                list(p.offline_replicas)) for p in t.partitions}


def brokers_of(resp) -> dict[int, int]:
    return {n.node_id: n.port for n in resp.brokers}


def log_bytes(broker: BrokerProcess, topic: str, partition: int) -> int:
    """Bytes in the partition's segment files in the broker's data directory."""
    return sum(os.path.getsize(f) for f in glob.glob(
        os.path.join(broker.data_dir, f"{topic}-{partition}", "*.log")))


def list_offset(broker: BrokerProcess, topic: str, partition: int,
                current_epoch: int = -1) -> tuple[int, int]:
    """(error, latest offset) from the broker."""
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=current_epoch,
                               timestamp=-1)])])
    req.API_VERSION = 7
    with kconnect(broker.bootstrap) as s:
        p = call(s, req).topics[0].partitions[0]
    return p.error_code, p.offset


def epoch_end(broker: BrokerProcess, topic: str, partition: int, current_epoch: int) -> int:
    """OffsetForLeaderEpoch's error for epoch 0 at the client's current leader epoch."""
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(topic=topic, partitions=[
        Topic.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current_epoch,
                                       leader_epoch=0)])])
    req.API_VERSION = 4
    with kconnect(broker.bootstrap) as s:
        return call(s, req).topics[0].partitions[0].error_code


def fetch_error(broker: BrokerProcess, topic: str, partition: int, current_epoch: int) -> int:
    from kafka.protocol.consumer import FetchRequest
    Req = FetchRequest[12]
    T = Req.FetchTopic
    req = Req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
              session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
              topics=[T(topic=topic, partitions=[T.FetchPartition(
                  partition=partition, fetch_offset=0, partition_max_bytes=1 << 20,
                  current_leader_epoch=current_epoch, log_start_offset=-1)])])
    with kconnect(broker.bootstrap) as s:
        return call(s, req).responses[0].partitions[0].error_code


def produce_error(broker: BrokerProcess, topic: str, partition: int, n: int = 3) -> int:
    with kconnect(broker.bootstrap) as s:
        return produce_raw(s, topic, partition, simple_batch(n)).error_code


def test_every_broker_lists_the_live_brokers_and_the_controller(cluster):
    b, z = cluster
    ports = {i: broker.port for i, broker in zip((1, 2, 3), b)}
    for broker in b:
        resp = eventually(lambda: metadata(broker.bootstrap), lambda r: brokers_of(r) == ports,
                          timeout=WAIT_S)
        assert brokers_of(resp) == ports and resp.controller_id == -1  # no controller yet
    z.client.create(zkdata.CONTROLLER, zkdata.ControllerRegistration(2, 0).encode(),
                    ephemeral=True)
    for broker in b:
        assert eventually(lambda: metadata(broker.bootstrap).controller_id, lambda c: c == 2,
                          timeout=WAIT_S) == 2
        resp = describe_cluster(broker.bootstrap)
        assert resp.controller_id == 2
        assert {n.broker_id: n.port for n in resp.brokers} == ports
        assert resp.cluster_id == z.cluster_id()


def test_partitions_led_by_three_brokers_take_clients_to_their_leaders(cluster):
    b, z = cluster
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    create_topic(z, topic, {0: [1], 1: [2], 2: [3]}, epoch=4)
    want = {p: (NONE, p + 1, 4, [p + 1], [p + 1], []) for p in range(3)}
    for broker in b:  # every broker answers the same leaders, epochs, replicas and ISR
        assert eventually(lambda: partitions(metadata(broker.bootstrap, [topic]), topic),
                          lambda seen: seen == want, timeout=WAIT_S) == want
    n = 20
    records = [(p, f"k{i}".encode(), f"v{p}-{i}".encode(), None, None)
               for p in range(3) for i in range(n)]
    # each client through one bootstrap broker; every partition's records go to its leader
    for client, bootstrap in (("confluent", b[0]), ("kafka-python", b[2])):
        acked = kclients.produce(client, bootstrap.bootstrap, topic, records, timeout=30)
        assert sorted({p for p, _ in acked}) == [0, 1, 2]
    for client, bootstrap in (("confluent", b[1]), ("kafka-python", b[0])):
        got = kclients.consume(client, bootstrap.bootstrap, topic, {p: 2 * n for p in range(3)},
                               timeout=30)
        for p in range(3):
            assert [r[3] for r in got[p]] == [f"v{p}-{i}".encode() for i in range(n)] * 2
    for p in range(3):
        leader = b[p]
        assert list_offset(leader, topic, p) == (NONE, 2 * n)
        assert log_bytes(leader, topic, p) > 0
        assert all(log_bytes(other, topic, p) == 0 for other in b if other is not leader)


def test_a_non_leader_and_stale_or_future_epochs_are_refused(cluster):
    (b1, b2, b3), z = cluster
    topic = f"fence-{uuid.uuid4().hex[:8]}"
    create_topic(z, topic, {0: [1, 2]}, epoch=3)
    for b in (b1, b2, b3):  # each broker's view follows ZooKeeper on its own
        eventually(lambda: partitions(metadata(b.bootstrap, [topic]), topic),
                   lambda seen: seen.get(0, (None, None))[1] == 1, timeout=WAIT_S)
    eventually(lambda: list_offset(b1, topic, 0), lambda r: r[0] == NONE, timeout=WAIT_S)
    assert produce_error(b1, topic, 0) == NONE
    assert produce_error(b2, topic, 0) == NOT_LEADER  # a follower
    assert produce_error(b3, topic, 0) == NOT_LEADER  # no replica there
    assert produce_error(b1, topic, 5) == UNKNOWN_TOPIC_OR_PARTITION
    # the client's current leader epoch against the leader's 3
    assert [fetch_error(b1, topic, 0, e) for e in (-1, 2, 3, 4)] == \
        [NONE, FENCED_LEADER_EPOCH, NONE, UNKNOWN_LEADER_EPOCH]
    assert [list_offset(b1, topic, 0, e)[0] for e in (-1, 2, 3, 4)] == \
        [NONE, FENCED_LEADER_EPOCH, NONE, UNKNOWN_LEADER_EPOCH]
    assert [epoch_end(b1, topic, 0, e) for e in (-1, 2, 3, 4)] == \
        [NONE, FENCED_LEADER_EPOCH, NONE, UNKNOWN_LEADER_EPOCH]
    assert fetch_error(b2, topic, 0, 3) == NOT_LEADER
    assert fetch_error(b3, topic, 0, -1) == NOT_LEADER
    # the controller moves leadership to broker 2 at epoch 4
    set_state(z, topic, 0, 2, 4, [1, 2])
    assert eventually(lambda: produce_error(b2, topic, 0), lambda e: e == NONE,
                      timeout=WAIT_S) == NONE
    assert eventually(lambda: produce_error(b1, topic, 0), lambda e: e == NOT_LEADER,
                      timeout=WAIT_S) == NOT_LEADER
    assert fetch_error(b2, topic, 0, 3) == FENCED_LEADER_EPOCH  # the old leader's epoch
    assert fetch_error(b1, topic, 0, 4) == NOT_LEADER
    with kconnect(b2.bootstrap) as s:
        assert fetch_raw(s, topic, 0, 0).error_code == NONE


def test_producers_follow_a_leadership_move(cluster):
    (b1, b2, _), z = cluster
    topic = f"move-{uuid.uuid4().hex[:8]}"
    create_topic(z, topic, {0: [1, 2]})
    eventually(lambda: list_offset(b1, topic, 0), lambda r: r == (NONE, 0), timeout=WAIT_S)
    import confluent_kafka as ck
    from kafka import KafkaProducer
    cp = ck.Producer({"bootstrap.servers": b2.bootstrap, "linger.ms": 5,
                      "message.timeout.ms": 30000, "topic.metadata.refresh.interval.ms": 1000})
    kp = KafkaProducer(bootstrap_servers=b2.bootstrap, linger_ms=5, retries=20,
                       retry_backoff_ms=200, request_timeout_ms=10000)
    errors: list = []

    def send(n: int) -> None:
        for i in range(n):
            cp.produce(topic, value=b"c%d" % i, partition=0,
                       on_delivery=lambda err, _m: err and errors.append(err))
            kp.send(topic, value=b"k%d" % i, partition=0).get(timeout=30)
        assert cp.flush(30) == 0 and not errors, errors
    try:
        send(5)  # to broker 1, the leader at epoch 0
        set_state(z, topic, 0, 2, 1, [1, 2])
        eventually(lambda: list_offset(b2, topic, 0), lambda r: r == (NONE, 0), timeout=WAIT_S)
        send(7)  # the same producers find broker 2, the leader at epoch 1
    finally:
        kp.close(timeout=5)
    assert list_offset(b1, topic, 0) == (NOT_LEADER, -1)
    # broker 2 had replicated broker 1's 10 records as its follower (replication.py)
    assert list_offset(b2, topic, 0) == (NONE, 24)
    got = kclients.consume("kafka-python", b1.bootstrap, topic, {0: 24}, timeout=30)
    assert sorted(r[3] for r in got[0]) == sorted(
        [b"c%d" % i for i in range(5)] + [b"k%d" % i for i in range(5)] +
        [b"c%d" % i for i in range(7)] + [b"k%d" % i for i in range(7)])


def test_a_killed_broker_leaves_metadata_and_its_replicas_go_offline(cluster):
    (b1, b2, b3), z = cluster
    topic = f"offline-{uuid.uuid4().hex[:8]}"
    create_topic(z, topic, {0: [1, 2], 1: [2, 3], 2: [3, 1]}, epoch=2)
    want = {0: (NONE, 1, 2, [1, 2], [1, 2], []), 1: (NONE, 2, 2, [2, 3], [2, 3], []),
            2: (NONE, 3, 2, [3, 1], [3, 1], [])}
    assert eventually(lambda: partitions(metadata(b1.bootstrap, [topic]), topic),
                      lambda seen: seen == want, timeout=WAIT_S) == want
    b3.kill()
    ports = {1: b1.port, 2: b2.port}
    # Kafka's answer for a partition whose leader is not live (KRaftMetadataCache /
    # ZkMetadataCache.getPartitionMetadata): LEADER_NOT_AVAILABLE, leader -1, the epoch,
    # replicas and ISR as they are; the state znode keeps naming 3 until a controller acts.
    offline = {0: (NONE, 1, 2, [1, 2], [1, 2], []), 1: (NONE, 2, 2, [2, 3], [2, 3], [3]),
               2: (LEADER_NOT_AVAILABLE, -1, 2, [3, 1], [3, 1], [3])}
    for broker in (b1, b2):
        resp = eventually(lambda: metadata(broker.bootstrap, [topic]),
                          lambda r: brokers_of(r) == ports, timeout=WAIT_S)
        assert brokers_of(resp) == ports
        assert partitions(resp, topic) == offline
    assert produce_error(b1, topic, 2) == NOT_LEADER  # a follower of the dead leader


def test_each_listener_sees_the_brokers_at_their_endpoints_on_it(connect, zk):
    """Two listeners: Metadata and DescribeCluster through one name every broker at its
    endpoint on that listener, as Kafka answers a request by its listener name."""
    made = []
    try:
        for i in (1, 2):
            plain, external = free_port_pair(), free_port_pair()
            made.append((BrokerProcess(port=plain, settings={
                "node.id": str(i), "zookeeper.connect": connect,
                "zookeeper.session.timeout.ms": str(SESSION_MS),
                "zookeeper.connection.timeout.ms": str(CONNECT_MS),
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},EXTERNAL://127.0.0.1:{external}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"}),
                external))
            made[-1][0].start()
        registered(zk(), {1, 2})
        plain_ports = {i: b.port for i, (b, _) in zip((1, 2), made)}
        external_ports = {i: e for i, (_, e) in zip((1, 2), made)}
        b1, external1 = made[0]
        assert brokers_of(eventually(lambda: metadata(b1.bootstrap),
                                     lambda r: len(r.brokers) == 2, timeout=WAIT_S)) == plain_ports
        external = f"127.0.0.1:{external1}"
        assert brokers_of(metadata(external)) == external_ports
        assert {n.broker_id: n.port for n in describe_cluster(external).brokers} == \
            external_ports
    finally:
        for b, _ in made:
            b.kill()
            b.cleanup()
