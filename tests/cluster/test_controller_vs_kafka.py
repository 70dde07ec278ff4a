# The controller against the reference: one failure scenario played on two chroots of the same
# ZooKeeper, one run by an Apache Kafka 3.8.0 broker in ZooKeeper mode (broker 0, which wins
# /controller and hosts no replica of the topic), one by kafkalite's Controller. Brokers 1 and
# 2 are simulated registrations (closing a session is a broker's death); the topic is written
# by admin_zk on both sides, so Kafka's controller also proves it accepts those znodes. After
# each step the partition state znodes (every field but controller_epoch, the znode version
# = partition epoch, the JSON key order) must be the same on both sides.
from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kafkalite.cluster import admin_zk, zkdata
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.zk import ZkClient
from tests.cluster.test_controller import SESSION_MS, eventually, register
from tests.helpers import real_kafka, zookeeper as zkh

ASSIGNMENT = {0: [1, 2], 1: [2, 1], 2: [1, 2]}
SETTLE_S = 1.5  # quiet time after a step, so a second write of the same step is seen too


@pytest.fixture(scope="module")
def kafka_chroot(zookeeper):
    if (reason := real_kafka.unavailable_reason()) is not None:
        pytest.skip(reason)
    connect = f"{zookeeper}/kafka-ref-{uuid.uuid4().hex}"
    kafka = zkh.ZkModeKafka(connect, broker_id=0,
                            settings={"auto.leader.rebalance.enable": "false"})
    try:
        kafka.start()
        yield connect
    finally:
        kafka.cleanup()


async def snapshot(zk: ZkClient) -> dict[int, tuple]:
    out = {}
    for p in ASSIGNMENT:
        try:
            data, st = await zk.get(zkdata.partition_state_path("t", p))
        except Exception:  # noqa: BLE001 - not created yet
            continue
        s = zkdata.PartitionState.decode(data)
        out[p] = (s.leader, s.leader_epoch, s.isr, s.leader_recovery_state, st.version,
                  list(json.loads(data)))
    return out


async def play(connect: str) -> list[dict[int, tuple]]:
    """The scenario; the states after each step."""
    admin = ZkClient(connect, SESSION_MS)
    await admin.start()
    sessions = [admin]
    try:
        await admin.ensure_persistent_paths()
        brokers = {b: await register(connect, b) for b in (1, 2)}
        sessions += brokers.values()
        steps = []

        async def step(accept) -> None:
            await eventually(lambda: snapshot(admin), accept, timeout=30)
            await asyncio.sleep(SETTLE_S)
            steps.append(await snapshot(admin))

        await admin_zk.create_topic(admin, "t", len(ASSIGNMENT), 2, assignment=ASSIGNMENT)
        await step(lambda s: len(s) == len(ASSIGNMENT))
        await brokers[1].close()  # leads 0 and 2, follows 1
        await step(lambda s: all(v[0] != 1 and 1 not in v[2] for v in s.values()))
        await brokers[2].close()  # the last ISR member of every partition
        await step(lambda s: all(v[0] == -1 for v in s.values()))
        sessions.append(await register(connect, 1))  # out of sync: must not lead
        await step(lambda s: True)
        sessions.append(await register(connect, 2))
        await step(lambda s: all(v[0] == 2 for v in s.values()))
        return steps
    finally:
        await asyncio.gather(*(s.close() for s in sessions))


async def test_failover_states_match_kafka(kafka_chroot, zookeeper):
    kafka_steps = await play(kafka_chroot)
    lite_connect = f"{zookeeper}/kl-{uuid.uuid4().hex}"
    zk = ZkClient(lite_connect, SESSION_MS)
    await zk.start()
    controller = Controller(zk, 0)
    await controller.start()
    try:
        lite_steps = await play(lite_connect)
    finally:
        await controller.stop()
        await zk.close()
    for i, (kafka, lite) in enumerate(zip(kafka_steps, lite_steps)):
        assert lite == kafka, f"step {i}"
    assert len(lite_steps) == len(kafka_steps) == 5
    # the facts the comparison rests on: offline keeps the last ISR member; it leads again
    assert all(v[:3] == (-1, 2, (2,)) for v in kafka_steps[2].values())
    assert all(v[:3] == (2, 3, (2,)) for v in kafka_steps[4].values())
