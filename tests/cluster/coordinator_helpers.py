# What the coordinator cluster tests share: raw FindCoordinator / group requests over sockets
# and the leader of a group's __consumer_offsets partition as ZooKeeper says it.
from __future__ import annotations

import contextlib
from typing import Iterator

from kafka.protocol import consumer, metadata

from kafkalite.cluster import zkdata
from kafkalite.coordinator.offsets_log import partition_for
from kafkalite.wire.errors import ErrorCode
from kafkalite.testing import BrokerProcess
from tests.cluster.test_membership import CONNECT_MS, SESSION_MS, WAIT_S, Zk, registered
from tests.cluster.test_zk_admin_apis import settled_controller
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers import zookeeper as zkh
from tests.helpers.real_kafka import eventually, free_port_pair

OFFSETS = "__consumer_offsets"
TXN = "__transaction_state"
GROUP, TRANSACTION = 0, 1
# every answer that means "not here yet, ask again" while a coordinator settles
SETTLING = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
            ErrorCode.not_coordinator}


def find(bootstrap: str, key: str, key_type: int = GROUP) -> tuple[int, int]:
    """One FindCoordinator v4: (error code, node id)."""
    with open_socket(bootstrap) as s:
        (c,) = call(s, metadata.FindCoordinatorRequest[4](
            key_type=key_type, coordinator_keys=[key])).coordinators
    return c.error_code, c.node_id


def found(bootstrap: str, key: str, key_type: int = GROUP) -> int:
    """The coordinator's node id once the broker names one (bounded)."""
    err, node = eventually(lambda: find(bootstrap, key, key_type),
                           lambda r: r[0] == ErrorCode.none, timeout=WAIT_S)
    assert err == ErrorCode.none, err
    return node


def leader_of(z: Zk, topic: str, key: str) -> tuple[int, int] | None:
    """(leader, leader epoch) of the key's partition of `topic` in ZooKeeper, None before
    the topic or its state exists."""
    path = zkdata.topic_path(topic)
    if z.client.exists(path) is None:
        return None
    a = zkdata.TopicAssignment.decode(z.client.get(path)[0])
    state_path = zkdata.partition_state_path(topic, partition_for(key, len(a.partitions)))
    if z.client.exists(state_path) is None:
        return None
    st = zkdata.PartitionState.decode(z.client.get(state_path)[0])
    return st.leader, st.leader_epoch


def offset_fetch(bootstrap: str, group: str, topic: str, partitions: list[int]
                 ) -> tuple[int, dict[int, int]]:
    """OffsetFetch v5: (top-level error, {partition: committed offset})."""
    R = consumer.OffsetFetchRequest[5]
    with open_socket(bootstrap) as s:
        resp = call(s, R(group_id=group, topics=[R.OffsetFetchRequestTopic(
            name=topic, partition_indexes=partitions)]))
    got = {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
    return resp.error_code, got


def heartbeat(bootstrap: str, group: str, member: str = "m", generation: int = 1) -> int:
    R = consumer.HeartbeatRequest[3]
    with open_socket(bootstrap) as s:
        return call(s, R(group_id=group, generation_id=generation, member_id=member,
                         group_instance_id=None)).error_code


def cluster(brokers, zk, ids=(1, 2, 3), **settings: str) -> tuple[dict, Zk, int]:
    """Brokers `ids` started with `settings`, registered, a controller elected:
    ({id: BrokerProcess}, a kazoo session, the controller's id)."""
    procs = dict(zip(ids, brokers(*ids, **settings)))
    z = zk()
    registered(z, set(ids))
    return procs, z, settled_controller(z, procs)


@contextlib.contextmanager
def lone_kafkalite(zookeeper: str, settings: dict[str, str]) -> Iterator[tuple[str, str]]:
    """One kafkalite broker in ZooKeeper mode on a chroot of its own of `zookeeper`,
    registered and controller: (its zookeeper.connect, bootstrap)."""
    connect = zkh.chroot_connect(zookeeper)
    b = BrokerProcess(port=free_port_pair(), settings={
        "node.id": "1", "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "zookeeper.connection.timeout.ms": str(CONNECT_MS), **settings})
    try:
        b.start()
        z = Zk(connect)
        try:
            eventually(lambda: z.client.exists(zkdata.CONTROLLER), lambda s: s is not None,
                       timeout=WAIT_S)
        finally:
            z.close()
        yield connect, b.bootstrap
    finally:
        b.kill()
        b.cleanup()
