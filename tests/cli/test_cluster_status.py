# `kafkalite cluster status` as operators run it (a subprocess), against a single kafkalite
# node, a 3-broker kafkalite cluster on ZooKeeper and a 2-broker Apache Kafka 3.8 in
# ZooKeeper mode: the same scenario and the same assertions for both clusters. What the
# command prints is checked against what ZooKeeper holds (read with kazoo): the cluster id,
# the controller, the live brokers; after a broker is SIGKILLed and its session has expired,
# it is an offline replica out of every ISR, its RF=1 partition is offline, and the
# kafka-topics.sh filters and --fail-on-under-replicated see it.
from __future__ import annotations

import uuid

import pytest

from kafkalite.testing import BrokerProcess
from tests.cli.conftest import Result, run_cli
from tests.cluster.test_membership import CONNECT_MS, SESSION_MS, WAIT_S, Zk
from tests.cluster.test_zk_admin_apis import controller_id, create
from tests.helpers import real_kafka, zookeeper as zkh
from tests.helpers.real_kafka import eventually, free_port_pair

MIN_ISR = 2


def status(bootstrap: str, *flags: str) -> Result:
    return run_cli("cluster", "status", "--bootstrap-server", bootstrap, "--timeout", "5000",
                   *flags)


def status_json(bootstrap: str, *flags: str) -> dict | None:
    r = status(bootstrap, "--json", *flags)
    return r.json() if r.code == 0 else None


def listed(report: dict) -> list[tuple[str, int]]:
    return sorted((t["name"], p["partition"]) for t in report["topics"] for p in t["partitions"])


def test_a_single_node_is_its_own_controller_and_every_partition_is_in_sync(broker_process):
    bootstrap = broker_process.bootstrap
    assert run_cli("topics", "create", "--topic", "solo", "--partitions", "2",
                   "--bootstrap-server", bootstrap).code == 0
    report = status_json(bootstrap, "--fail-on-under-replicated")
    node = report["controller"]
    host, port = bootstrap.rsplit(":", 1)
    assert report["brokers"] == [{"id": node, "host": host, "port": int(port), "rack": None}]
    with open(f"{broker_process.data_dir}/meta.properties") as f:
        assert f"cluster.id={report['cluster_id']}\n" in f.read()
    [solo] = [t for t in report["topics"] if t["name"] == "solo"]
    assert solo["min_insync_replicas"] == 1
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["offline_replicas"])
            for p in solo["partitions"]] == [(0, node, [node], [node], []),
                                              (1, node, [node], [node], [])]
    assert report["summary"]["under_replicated"] == report["summary"]["offline"] == 0
    text = status(bootstrap)
    assert text.code == 0 and f"Controller: {node}" in text.out
    assert text.out.rstrip().endswith("0 under-replicated, 0 offline, 0 under min ISR")
    assert listed(status_json(bootstrap, "--under-replicated-partitions")) == []


def scenario(connect: str, procs: dict[int, BrokerProcess]) -> None:
    """Topics on a settled cluster, the status before and after a broker is SIGKILLed."""
    n = len(procs)
    z = Zk(connect)
    try:
        ctrl = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
        assert ctrl in procs
        victim = max(i for i in procs if i != ctrl)
        assert create(procs[ctrl].bootstrap, "orders", partitions=2, rf=n,
                      configs={"min.insync.replicas": str(MIN_ISR)}).error_code == 0
        assert create(procs[ctrl].bootstrap, "single", partitions=n, rf=1).error_code == 0
        asked = procs[victim].bootstrap  # any broker answers; not the controller's own view

        def settled(r):
            return r is not None and len(r["brokers"]) == n and listed(r) == sorted(
                [("orders", p) for p in range(2)] + [("single", p) for p in range(n)]) \
                and all(p["leader"] >= 0 for t in r["topics"] for p in t["partitions"])
        before = eventually(lambda: status_json(asked), settled, timeout=WAIT_S, interval=0.5)
        assert settled(before), before
        assert before["cluster_id"] == z.cluster_id()
        assert before["controller"] == ctrl
        assert [(b["id"], f"{b['host']}:{b['port']}") for b in before["brokers"]] == \
            [(i, procs[i].bootstrap) for i in sorted(procs)]
        orders = {t["name"]: t for t in before["topics"]}["orders"]
        assert orders["min_insync_replicas"] == MIN_ISR
        for p in orders["partitions"]:
            assert sorted(p["replicas"]) == sorted(procs) and sorted(p["isr"]) == sorted(procs)
            assert p["leader"] in procs and p["offline_replicas"] == []
        assert before["summary"] == {"brokers": n, "topics": 2, "partitions": 2 + n,
                                     "under_replicated": 0, "offline": 0, "under_min_isr": 0}
        assert status(asked, "--fail-on-under-replicated").code == 0

        procs[victim].kill()
        asked = procs[ctrl].bootstrap
        after = eventually(lambda: status_json(asked),
                           lambda r: r is not None and len(r["brokers"]) == n - 1
                           and r["summary"]["under_replicated"] == 2
                           and r["summary"]["offline"] == 1,
                           timeout=WAIT_S, interval=0.5)
        assert [b["id"] for b in after["brokers"]] == sorted(set(procs) - {victim})
        topics = {t["name"]: t for t in after["topics"]}
        for p in topics["orders"]["partitions"]:
            assert p["offline_replicas"] == [victim] and victim not in p["isr"]
            assert p["leader"] in procs and p["leader"] != victim
            assert p["under_replicated"] and p["under_min_isr"] == (n - 1 < MIN_ISR)
        [gone] = [p for p in topics["single"]["partitions"] if p["replicas"] == [victim]]
        assert gone["unavailable"] and gone["leader"] == -1
        assert gone["offline_replicas"] == [victim]
        assert listed(status_json(asked, "--unavailable-partitions")) == [
            ("single", gone["partition"])]
        assert listed(status_json(asked, "--under-replicated-partitions")) == [
            ("orders", 0), ("orders", 1)]
        at_min = listed(status_json(asked, "--at-min-isr-partitions"))
        under_min = listed(status_json(asked, "--under-min-isr-partitions"))
        orders_listed = [("orders", 0), ("orders", 1)]
        assert (orders_listed if n - 1 == MIN_ISR else []) == [x for x in at_min
                                                               if x[0] == "orders"]
        assert ("single", gone["partition"]) in under_min  # unavailable counts as under
        failed = status(asked, "--fail-on-under-replicated")
        assert failed.code == 1
        assert failed.err.strip() == "error: 2 partition(s) under-replicated, 1 offline"
        assert "1 offline" in status(asked).out.splitlines()[-1]
    finally:
        z.close()


def test_three_kafkalite_brokers_status_before_and_after_a_broker_dies(zookeeper):
    connect = zkh.chroot_connect(zookeeper)
    procs = {i: BrokerProcess(port=free_port_pair(), settings={
        "node.id": str(i), "zookeeper.connect": connect, "broker.rack": f"r{i}",
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "zookeeper.connection.timeout.ms": str(CONNECT_MS)}) for i in (1, 2, 3)}
    try:
        for b in procs.values():
            b.start()
        scenario(connect, procs)
        racks = {b["id"]: b["rack"] for b in status_json(procs[1].bootstrap)["brokers"]}
        assert all(racks[i] == f"r{i}" for i in racks)
    finally:
        for b in procs.values():
            b.kill()
            b.cleanup()


def test_the_same_against_kafka_in_zookeeper_mode(zookeeper):
    if (reason := real_kafka.unavailable_reason()) is not None:
        pytest.skip(reason)
    connect = f"{zookeeper}/kafka-ref-{uuid.uuid4().hex}"
    procs = {i: zkh.ZkModeKafka(connect, broker_id=i, settings={
        "zookeeper.session.timeout.ms": str(SESSION_MS)}) for i in (1, 2)}
    try:
        for b in procs.values():
            b.start()
        scenario(connect, procs)
    finally:
        for b in procs.values():
            b.kill()
            b.cleanup()


def test_partition_states_are_kafka_topics_describe_ones():
    from kafkalite.tools.cluster_status import partition_flags
    live = {1, 2, 3}
    ok = partition_flags(1, [1, 2, 3], [1, 2, 3], live, 2)
    assert ok == {"under_replicated": False, "unavailable": False, "under_min_isr": False,
                  "at_min_isr": False}
    assert partition_flags(1, [1, 2, 3], [1, 2], live, 2)["at_min_isr"]
    assert partition_flags(1, [1, 2, 3], [1], live, 2)["under_min_isr"]
    # a leader that is not a live broker, or none: unavailable, and so under min ISR
    for leader in (-1, 4):
        flags = partition_flags(leader, [4], [4], live, 1)
        assert flags["unavailable"] and flags["under_min_isr"] and not flags["under_replicated"]
    assert partition_flags(1, [1], [1], live, None)["under_min_isr"] is None  # unknown config


def test_arguments_and_an_unreachable_broker_are_one_line(dead_bootstrap):
    from .conftest import assert_one_error_line
    r = run_cli("cluster", "status", "--under-replicated-partitions",
                "--unavailable-partitions", "--bootstrap-server", dead_bootstrap)
    assert_one_error_line(r, 2, "not allowed with")
    r = run_cli("cluster", "status", "--bootstrap-server", dead_bootstrap)
    assert_one_error_line(r, 1, "error:", dead_bootstrap, "refused")
    assert r.out == ""
