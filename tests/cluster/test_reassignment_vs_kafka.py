# Partition reassignment against the reference: the same scenario on three kafkalite brokers
# and on three Apache Kafka 3.8.0 brokers in ZooKeeper mode (each on its own chroot of the
# session ZooKeeper). An RF=2 topic on [1, 2] with data; the refused reassignments; a move to
# [2, 3] (the leader, 1, is not in the target); a move whose new replica is SIGSTOPped,
# listed and cancelled; then kafka-reassign-partitions.sh --execute / --verify. The answers,
# the topic and state znodes, and which brokers keep a local log must be the same.
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_reassignment import (TOPIC, alter, create_on, error_cases, listed,
                                             raw_topic_znode, settled)
from tests.cluster.test_zk_admin_apis import controller_id
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call, produce_raw, simple_batch
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import anchor_dir, eventually

SETTINGS = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "20000",
            "auto.leader.rebalance.enable": "false"}
TOOL_TIMEOUT_S = 90


def local_log(proc) -> bytes | None:
    """The partition's segments on `proc` (kafkalite: <dir>/<t>-0, Kafka: <dir>/logs/<t>-0),
    concatenated; None without a local log."""
    for d in (os.path.join(proc.data_dir, f"{TOPIC}-0"),
              os.path.join(proc.data_dir, "logs", f"{TOPIC}-0")):
        if os.path.isdir(d):
            return b"".join(open(os.path.join(d, f), "rb").read()
                            for f in sorted(os.listdir(d)) if f.endswith(".log"))
    return None


def holders(procs: dict) -> list[int]:
    return sorted(i for i, p in procs.items() if local_log(p) is not None)


def tool(bootstrap: str, *args: str) -> str:
    cmd = [os.path.join(anchor_dir(), "bin", "kafka-reassign-partitions.sh"),
           "--bootstrap-server", bootstrap, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                         env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"})
    # without the admin client's WARN that Kafka 3.8 in ZooKeeper mode lacks
    # DescribeTopicPartitions (kafkalite serves it: COMPATIBILITY.md)
    lines = (out.stdout + out.stderr).replace(bootstrap, "BOOTSTRAP").splitlines(True)
    return "".join(ln for ln in lines if "DescribeTopicPartitions API is not supported" not in ln)


def znodes(z: Zk, replicas: list[int], first_epoch: int) -> tuple:
    """Once the partition is settled on `replicas`: the topic znode (without the topic
    id) and the state's leader, ISR and leader epochs since creation."""
    st = settled(z, replicas)[3]
    raw = raw_topic_znode(z)
    raw.pop("topic_id", None)
    return raw, st.leader, sorted(st.isr), st.leader_epoch - first_epoch


def scenario(procs: dict, z: Zk) -> list:
    seen: list = []
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    assert cid == 3  # started first: broker 1, stopped below, is not the one answering
    ctl = procs[cid].bootstrap
    row = eventually(lambda: create_on(ctl, [1, 2]), lambda r: r.error_code == 0,
                     timeout=WAIT_S)
    assert row.error_code == 0
    first = settled(z, [1, 2])[3]
    with open_socket(procs[1].bootstrap, timeout=30) as s:
        seen.append(("produce", eventually(
            lambda: produce_raw(s, TOPIC, 0, simple_batch(20)).error_code,
            lambda c: c == 0, timeout=WAIT_S)))
    other = procs[next(i for i in sorted(procs) if i != cid)].bootstrap
    seen += error_cases(ctl, other)
    seen.append(("move to [2, 3]", alter(ctl, {(TOPIC, 0): [2, 3]})))
    seen.append(("after the move", znodes(z, [2, 3], first.leader_epoch)))
    seen.append(("local logs", eventually(lambda: holders(procs), lambda h: h == [2, 3],
                                          timeout=WAIT_S)))
    seen.append(("replica byte-identical", eventually(
        lambda: local_log(procs[2]) == local_log(procs[3]), lambda same: same,
        timeout=WAIT_S)))
    # a move that cannot complete: its new replica (1) is stopped, shorter than a session
    procs[1].proc.send_signal(signal.SIGSTOP)
    try:
        seen.append(("move to [3, 1]", alter(ctl, {(TOPIC, 0): [3, 1]})))
        seen.append(("listed", listed(ctl)))
        seen.append(("listed by name", listed(ctl, [(TOPIC, [0, 5]), ("nope", [0])])))
        seen.append(("cancel", alter(ctl, {(TOPIC, 0): None})))
        seen.append(("after the cancel", znodes(z, [2, 3], first.leader_epoch)))
        seen.append(("listed after the cancel", listed(ctl)))
    finally:
        procs[1].proc.send_signal(signal.SIGCONT)
    seen.append(("local logs after the cancel", eventually(
        lambda: holders(procs), lambda h: h == [2, 3], timeout=WAIT_S)))
    # Kafka's tool, back to [1, 2]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [1, 2]}]}, f)
    try:
        seen.append(("tool --execute", tool(ctl, "--reassignment-json-file", f.name,
                                            "--execute")))
        seen.append(("tool --verify", eventually(
            lambda: tool(ctl, "--reassignment-json-file", f.name, "--verify"),
            lambda out: "is completed" in out, timeout=WAIT_S)))
    finally:
        os.unlink(f.name)
    seen.append(("after the tool", znodes(z, [1, 2], first.leader_epoch)))
    seen.append(("local logs after the tool", eventually(
        lambda: holders(procs), lambda h: h == [1, 2], timeout=WAIT_S)))
    with open_socket(procs[1].bootstrap, timeout=30) as s:
        seen.append(("produce on the new leader", eventually(
            lambda: produce_raw(s, TOPIC, 0, simple_batch(1)).error_code,
            lambda c: c == 0, timeout=WAIT_S)))
    return seen


@pytest.fixture
def kafka_cluster(zookeeper):
    # 3 starts first and becomes the controller
    with zkh.kafka_on_zookeeper(zookeeper, (3, 1, 2), SETTINGS) as (connect, made), \
            contextlib.closing(Zk(connect)) as z:
        yield made, z


def test_reassignment_as_kafka(brokers, zk, kafka_cluster):
    kafka_procs, kafka_z = kafka_cluster
    expected = scenario(kafka_procs, kafka_z)
    procs = dict(zip((3,), brokers(3, **SETTINGS)))
    z = zk()
    registered(z, {3})
    eventually(lambda: controller_id(z), lambda c: c == 3, timeout=WAIT_S)
    procs.update(zip((1, 2), brokers(1, 2, **SETTINGS)))
    registered(z, {1, 2, 3})
    got = scenario(procs, z)
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not diffs, "\n".join(f"Kafka:     {e!r}\nkafkalite: {g!r}" for e, g in diffs)
    assert len(got) == len(expected)


def move_time(procs: dict, z: Zk, megabytes: int) -> tuple[float, int]:
    """Seconds from AlterPartitionReassignments to the move's completion in the topic znode,
    for a partition holding `megabytes` MB (1 KB records), and the bytes broker 3 then has."""
    from confluent_kafka import Producer
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    assert create_on(procs[cid].bootstrap, [1, 2]).error_code == 0
    settled(z, [1, 2])
    p = Producer({"bootstrap.servers": procs[1].bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(megabytes * 1024):
        while True:
            try:
                p.produce(TOPIC, value=b"x" * 1024, partition=0)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(120) == 0
    start = time.monotonic()
    assert alter(procs[cid].bootstrap, {(TOPIC, 0): [2, 3]})[2] == [(TOPIC, 0, 0, None)]
    eventually(lambda: raw_topic_znode(z), lambda r: r["partitions"] == {"0": [2, 3]} and
               not r["adding_replicas"], timeout=300, interval=0.05)
    return time.monotonic() - start, len(local_log(procs[3]) or b"")


@pytest.mark.skipif(not os.environ.get("KAFKALITE_LONG"), reason="a measurement: KAFKALITE_LONG=1")
def test_move_time_against_kafka(brokers, zk, kafka_cluster):
    """Prints how long moving a 100 MB partition takes on each (no assertion on timing)."""
    kafka_procs, kafka_z = kafka_cluster
    kafka_s, kafka_bytes = move_time(kafka_procs, kafka_z, 100)
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS)))
    z = zk()
    registered(z, {1, 2, 3})
    ours_s, ours_bytes = move_time(procs, z, 100)
    print(f"\nmove of 100 MB [1,2] -> [2,3]: Kafka 3.8 {kafka_s:.2f} s ({kafka_bytes} B on 3), "
          f"kafkalite {ours_s:.2f} s ({ours_bytes} B on 3)")
