# CreateTopics, CreatePartitions and DeleteTopics in a ZooKeeper-coordinated cluster (issue 17,
# design step 4, the broker side): three spawned kafkalite brokers on the test's chroot, raw
# requests over sockets, and what lands in ZooKeeper read back with kazoo and decoded with
# zkdata. As Kafka 3.8 in ZooKeeper mode: only the controller (/controller) takes these
# requests, every other broker answers NOT_CONTROLLER; the answer comes once the controller
# has written every new partition's state (or deleted the topic's znodes); each broker's
# local log follows the assignment.
from __future__ import annotations

import json
import os
import re
import uuid

from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest

from kafkalite.cluster import zkdata
from kafkalite.cluster.zk_admin import topic_uuid
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

T = CreateTopicsRequest.CreatableTopic
ZERO_UUID = uuid.UUID(int=0)


def create(bootstrap: str, name: str, partitions: int = 3, rf: int = 3,
           configs: dict[str, str] | None = None, validate_only: bool = False):
    """One CreateTopics v7 for one topic: its result row."""
    req = CreateTopicsRequest[7](topics=[T(
        name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=15000, validate_only=validate_only)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row


def grow(bootstrap: str, name: str, count: int):
    P = CreatePartitionsRequest.CreatePartitionsTopic
    with open_socket(bootstrap) as s:
        (row,) = call(s, CreatePartitionsRequest[1](topics=[P(
            name=name, count=count, assignments=None)], timeout_ms=15000,
            validate_only=False)).results
    return row


def delete(bootstrap: str, name: str):
    with open_socket(bootstrap) as s:
        (row,) = call(s, DeleteTopicsRequest[4](topic_names=[name],
                                                timeout_ms=15000)).responses
    return row


def delete_by_id(bootstrap: str, topic_id: uuid.UUID):
    D = DeleteTopicsRequest[6].DeleteTopicState
    with open_socket(bootstrap) as s:
        (row,) = call(s, DeleteTopicsRequest[6](topics=[D(name=None, topic_id=topic_id)],
                                                timeout_ms=15000)).responses
    return row


def controller_id(z: Zk) -> int | None:
    try:
        return zkdata.ControllerRegistration.decode(z.client.get(zkdata.CONTROLLER)[0]).broker_id
    except Exception:  # NoNodeError: between two controllers
        return None


def controller_epoch(z: Zk) -> int:
    return zkdata.decode_controller_epoch(z.client.get(zkdata.CONTROLLER_EPOCH)[0])


def assignment(z: Zk, name: str) -> zkdata.TopicAssignment | None:
    if z.client.exists(zkdata.topic_path(name)) is None:
        return None
    return zkdata.TopicAssignment.decode(z.client.get(zkdata.topic_path(name))[0])


def states(z: Zk, name: str, partitions) -> dict[int, zkdata.PartitionState]:
    """The partition states present now (read once, no waiting)."""
    out = {}
    for p in partitions:
        path = zkdata.partition_state_path(name, p)
        if z.client.exists(path) is not None:
            out[p] = zkdata.PartitionState.decode(z.client.get(path)[0])
    return out


def local_partitions(broker, name: str) -> list[int]:
    """The partition directories of `name` in the broker's data directory."""
    found = (re.fullmatch(rf"{re.escape(name)}-(\d+)", d) for d in os.listdir(broker.data_dir))
    return sorted(int(m.group(1)) for m in found if m)


def local_configs(broker, name: str) -> dict[str, str] | None:
    """The topic configs the broker's local log was created with (its topic file; None
    before it is written)."""
    try:
        with open(os.path.join(broker.data_dir, ".kafkalite", "topics", f"{name}.json")) as f:
            return json.load(f)["configs"]
    except FileNotFoundError:
        return None


def three_brokers(brokers, zk) -> tuple[dict, Zk, int]:
    """Brokers 1, 2, 3 registered: ({id: BrokerProcess}, a kazoo session, the controller)."""
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3)))
    z = zk()
    registered(z, {1, 2, 3})
    return procs, z, settled_controller(z, procs)


def settled_controller(z: Zk, among) -> int:
    cid = eventually(lambda: controller_id(z), lambda c: c in among, timeout=WAIT_S)
    assert cid in among
    return cid


def assert_online(z: Zk, name: str, partitions: int, live: set[int], rf: int) -> None:
    """The assignment is Kafka-shaped and every partition has a state with a live leader,
    read right after the answer: the answer waited for them."""
    a = assignment(z, name)
    assert a is not None and sorted(a.partitions) == list(range(partitions))
    for replicas in a.partitions.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= live
    found = states(z, name, a.partitions)
    assert sorted(found) == sorted(a.partitions)
    epoch = controller_epoch(z)
    for p, st in found.items():
        assert st.leader == a.partitions[p][0]  # the first live replica leads
        assert set(st.isr) == set(a.partitions[p]) and st.leader_epoch == 0
        assert st.controller_epoch == epoch


def test_the_controller_creates_grows_and_deletes_topics_others_answer_not_controller(
        brokers, zk):
    procs, z, cid = three_brokers(brokers, zk)
    ctrl = procs[cid].bootstrap
    other = procs[next(i for i in procs if i != cid)].bootstrap

    refused = create(other, "orders")
    assert (refused.error_code, refused.error_message) == (ErrorCode.not_controller, "")
    assert assignment(z, "orders") is None

    row = create(ctrl, "orders", configs={"retention.ms": "777000"})
    assert (row.error_code, row.num_partitions, row.replication_factor) == (0, 3, 3)
    assert_online(z, "orders", 3, {1, 2, 3}, 3)
    assert uuid.UUID(str(row.topic_id)) == topic_uuid(assignment(z, "orders").topic_id)
    assert zkdata.decode_topic_config(z.client.get(zkdata.topic_config_path("orders"))[0]) \
        == {"retention.ms": "777000"}

    too_many = create(ctrl, "wide", rf=4)
    assert (too_many.error_code, too_many.error_message) == (
        ErrorCode.invalid_replication_factor,
        "Replication factor: 4 larger than available brokers: 3.")
    again = create(ctrl, "orders")
    assert (again.error_code, again.error_message) == (
        ErrorCode.topic_already_exists, "Topic 'orders' already exists.")
    dry = create(ctrl, "dry", validate_only=True)
    assert (dry.error_code, dry.num_partitions, dry.replication_factor) == (0, 3, 3)
    assert assignment(z, "dry") is None

    for broker in procs.values():  # each broker's local log follows the assignment
        assert eventually(lambda: local_partitions(broker, "orders"), lambda ps: ps == [0, 1, 2],
                          timeout=WAIT_S) == [0, 1, 2]
        # the topic file is written after the partition directories (it makes the topic exist)
        assert eventually(lambda: local_configs(broker, "orders"), lambda c: c is not None,
                          timeout=WAIT_S) == {"retention.ms": "777000"}  # /config/topics

    assert grow(other, "orders", 5).error_code == ErrorCode.not_controller
    assert grow(ctrl, "orders", 5).error_code == 0
    assert_online(z, "orders", 5, {1, 2, 3}, 3)
    same = grow(ctrl, "orders", 5)
    assert (same.error_code, same.error_message) == (
        ErrorCode.invalid_partitions, "Topic already has 5 partitions.")

    assert delete(other, "orders").error_code == ErrorCode.not_controller
    assert assignment(z, "orders") is not None
    assert delete(ctrl, "orders").error_code == 0
    for path in (zkdata.topic_path("orders"), zkdata.topic_config_path("orders"),
                 zkdata.delete_topic_path("orders")):
        assert z.client.exists(path) is None, path
    assert delete(ctrl, "orders").error_code == ErrorCode.unknown_topic_or_partition
    for broker in procs.values():
        assert eventually(lambda: local_partitions(broker, "orders"), lambda ps: ps == [],
                          timeout=WAIT_S) == []

    topic_id = uuid.UUID(str(create(ctrl, "by-id", rf=2).topic_id))
    gone = delete_by_id(ctrl, topic_id)
    assert (gone.name, gone.error_code) == ("by-id", 0)
    assert assignment(z, "by-id") is None
    unknown = delete_by_id(ctrl, topic_id)
    assert unknown.error_code == ErrorCode.unknown_topic_id


def test_a_killed_controller_is_replaced_and_its_successor_creates_topics(brokers, zk):
    procs, z, first = three_brokers(brokers, zk)
    epoch = controller_epoch(z)
    procs[first].kill()
    live = set(procs) - {first}
    successor = settled_controller(z, live)
    assert controller_epoch(z) > epoch
    registered(z, live)  # the dead broker's session has expired

    ctrl = procs[successor].bootstrap
    assert create(ctrl, "after", rf=3).error_code == ErrorCode.invalid_replication_factor
    row = create(ctrl, "after", rf=2)
    assert (row.error_code, row.replication_factor) == (0, 2)
    assert_online(z, "after", 3, live, 2)
    survivor = procs[next(iter(live - {successor}))].bootstrap
    assert create(survivor, "other").error_code == ErrorCode.not_controller


def test_confluent_admin_client_finds_the_controller_from_a_non_controller_bootstrap(
        brokers, zk):
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    procs, z, cid = three_brokers(brokers, zk)
    other = procs[next(i for i in procs if i != cid)]
    # librdkafka sends admin requests to the controller that Metadata names (the view's)
    admin = AdminClient({"bootstrap.servers": other.bootstrap})
    admin.create_topics([NewTopic("ck", 3, 3)], operation_timeout=15,
                        request_timeout=15)["ck"].result(timeout=30)
    assert_online(z, "ck", 3, {1, 2, 3}, 3)
    admin.create_partitions([NewPartitions("ck", 4)], operation_timeout=15,
                            request_timeout=15)["ck"].result(timeout=30)
    assert_online(z, "ck", 4, {1, 2, 3}, 3)
    def listed() -> int:  # each broker's view follows ZooKeeper a watch event later
        topic = admin.list_topics(timeout=10).topics.get("ck")
        return 0 if topic is None else len(topic.partitions)
    assert eventually(listed, lambda n: n == 4, timeout=WAIT_S) == 4
    admin.delete_topics(["ck"], operation_timeout=15,
                        request_timeout=15)["ck"].result(timeout=30)
    assert assignment(z, "ck") is None
    assert eventually(lambda: "ck" in admin.list_topics(timeout=10).topics,
                      lambda present: not present, timeout=WAIT_S) is False
