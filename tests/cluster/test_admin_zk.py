# Topic creation and partition growth through ZooKeeper (kafkalite.cluster.admin_zk) against a
# real ZooKeeper: the znodes written (config first, then the assignment with a topic id), the
# placement over the registered brokers and their racks, and Kafka's errors.
from __future__ import annotations

import asyncio
import json

import pytest

from kafkalite.cluster import admin_zk, zkdata
from kafkalite.cluster.zk import ZkClient
from kafkalite.wire.errors import ErrorCode, KafkaError
from tests.cluster.test_controller import SESSION_MS, register
from tests.helpers.zookeeper import chroot_connect


@pytest.fixture
async def zk(zookeeper):
    connect = chroot_connect(zookeeper)
    admin = ZkClient(connect, SESSION_MS)
    await admin.start()
    await admin.ensure_persistent_paths()
    brokers = [await register(connect, b, rack) for b, rack in
               ((1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c"))]
    yield admin
    await asyncio.gather(*(c.close() for c in [*brokers, admin]))


async def test_create_topic_writes_config_then_assignment_rack_aware(zk):
    topic = await admin_zk.create_topic(zk, "t", 12, 3, {"retention.ms": "1000"})
    data, _ = await zk.get(zkdata.topic_path("t"))
    stored = zkdata.TopicAssignment.decode(data)
    assert stored == topic and stored.encode() == data
    assert json.loads(data)["version"] == 3 and len(stored.topic_id or "") == 22
    assert zkdata.decode_topic_config((await zk.get(zkdata.topic_config_path("t")))[0]) == \
        {"retention.ms": "1000"}
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert sorted(stored.partitions) == list(range(12))
    for replicas in stored.partitions.values():
        # the registrations' racks were read: every replica of a partition on its own rack
        assert len({racks[b] for b in replicas}) == 3
    leaders = [r[0] for r in stored.partitions.values()]
    assert sorted(leaders) == sorted([1, 2, 3, 4, 5, 6] * 2)


async def test_a_topic_is_created_once(zk):
    results = await asyncio.gather(*(admin_zk.create_topic(zk, "once", 1, 1)
                                     for _ in range(4)), return_exceptions=True)
    created = [r for r in results if isinstance(r, zkdata.TopicAssignment)]
    refused = [r for r in results if isinstance(r, KafkaError)]
    assert len(created) == 1 and len(refused) == 3
    assert {e.code for e in refused} == {ErrorCode.topic_already_exists}
    stored = zkdata.TopicAssignment.decode((await zk.get(zkdata.topic_path("once")))[0])
    assert stored.topic_id == created[0].topic_id


@pytest.mark.parametrize("kwargs, code", [
    ({"partitions": 1, "replication_factor": 7}, ErrorCode.invalid_replication_factor),
    ({"partitions": 0, "replication_factor": 1}, ErrorCode.invalid_partitions),
    ({"partitions": 1, "replication_factor": 2, "assignment": {0: [1, 1]}},
     ErrorCode.invalid_replica_assignment),
    ({"partitions": 1, "replication_factor": 2, "assignment": {0: [1, 9]}},
     ErrorCode.invalid_replica_assignment),
    ({"partitions": 2, "replication_factor": 1, "assignment": {0: [1], 2: [2]}},
     ErrorCode.invalid_replica_assignment),
])
async def test_invalid_topics_are_refused_and_nothing_is_written(zk, kwargs, code):
    with pytest.raises(KafkaError) as refused:
        await admin_zk.create_topic(zk, "bad", **kwargs)
    assert refused.value.code == code
    assert await zk.exists(zkdata.topic_path("bad")) is None


async def test_create_partitions_continues_the_round_robin_and_keeps_the_topic(zk):
    ids = [1, 2, 3, 4, 5, 6]
    racks = {b: None for b in ids}  # rack-unaware: a plain round robin of the leaders
    before = await admin_zk.create_topic(zk, "t", 3, 2, racks=racks)
    start = ids.index(before.partitions[0][0])
    after = await admin_zk.create_partitions(zk, "t", 8, racks=racks)
    stored = zkdata.TopicAssignment.decode((await zk.get(zkdata.topic_path("t")))[0])
    assert stored == after and after.topic_id == before.topic_id
    assert {p: after.partitions[p] for p in range(3)} == before.partitions
    for p in range(3, 8):
        assert after.partitions[p][0] == ids[(p + start) % len(ids)]
        assert len(set(after.partitions[p])) == 2


async def test_create_partitions_errors(zk):
    await admin_zk.create_topic(zk, "t", 2, 1)
    for total, code in ((2, ErrorCode.invalid_partitions), (1, ErrorCode.invalid_partitions)):
        with pytest.raises(KafkaError) as refused:
            await admin_zk.create_partitions(zk, "t", total)
        assert refused.value.code == code
    with pytest.raises(KafkaError) as refused:
        await admin_zk.create_partitions(zk, "t", 4, assignment={2: [1]})
    assert refused.value.code == ErrorCode.invalid_replica_assignment
    with pytest.raises(KafkaError) as refused:
        await admin_zk.create_partitions(zk, "nope", 4)
    assert refused.value.code == ErrorCode.unknown_topic_or_partition
