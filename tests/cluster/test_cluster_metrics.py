# The replication and controller gauges (kafkalite/cluster/cluster_metrics.py) scraped from
# /metrics: of a single node, and of each broker of a 3-broker cluster before and after the
# controller is SIGKILLed. Every expected value is computed from what ZooKeeper holds (read
# with kazoo): the leaders, the controller, the dead broker's RF=1 partition.
from __future__ import annotations

from kafkalite.cluster import zkdata
from kafkalite.testing import BrokerProcess, free_port
from tests.cluster.test_membership import CONNECT_MS, SESSION_MS, WAIT_S, Zk, registered
from tests.cluster.test_zk_admin_apis import controller_id, create
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually, free_port_pair
from tests.test_metrics import metric, scrape

RM = "kafka_server_ReplicaManager_"
KC = "kafka_controller_KafkaController_"
CHANGES = "kafka_controller_ControllerStats_ControllerChangeRateAndTimeMs_total"
TOPICS = {"orders": 3, "single": 1}  # name -> replication factor, 3 partitions each


def gauges(port: int) -> dict[str, float]:
    s = scrape(port)
    return {"under": metric(s, RM + "UnderReplicatedPartitions"),
            "under_min": metric(s, RM + "UnderMinIsrPartitionCount"),
            "leaders": metric(s, RM + "LeaderCount"),
            "partitions": metric(s, RM + "PartitionCount"),
            "active": metric(s, KC + "ActiveControllerCount"),
            "offline": metric(s, KC + "OfflinePartitionsCount"),
            "changes": metric(s, CHANGES),
            "shrinks": s.get(RM + "IsrShrinksPerSec_total"),
            "expands": s.get(RM + "IsrExpandsPerSec_total"),
            "legacy": metric(s, "kafkalite_under_replicated_partitions")}


def zk_states(z: Zk) -> dict[tuple[str, int], tuple[zkdata.PartitionState, tuple[int, ...]]]:
    out = {}
    for name in TOPICS:
        a = zkdata.TopicAssignment.decode(z.client.get(zkdata.topic_path(name))[0])
        for p, replicas in a.partitions.items():
            data = z.client.get(zkdata.partition_state_path(name, p))[0]
            out[(name, p)] = (zkdata.PartitionState.decode(data), tuple(replicas))
    return out


def expected(z: Zk, live: set[int], controller: int) -> dict[int, dict[str, float]]:
    """Each live broker's gauges as Kafka counts them, from the znodes."""
    out = {}
    states = zk_states(z)
    for i in live:
        led = [(k, st, r) for k, (st, r) in states.items() if st.leader == i]
        under = sum(len(st.isr) < len(r) for _, st, r in led)
        # min.insync.replicas=3 on orders, the default 1 on single
        under_min = sum(len(st.isr) < (3 if k[0] == "orders" else 1) for k, st, _ in led)
        offline = sum(st.leader not in live for st, _ in states.values())
        out[i] = {"under": under, "under_min": under_min, "leaders": len(led),
                  "partitions": sum(i in r for _, r in states.values()),
                  "active": int(i == controller), "offline": offline if i == controller else 0}
    return out


def picked(g: dict[str, float]) -> dict[str, float]:
    return {k: g[k] for k in ("under", "under_min", "leaders", "partitions", "active",
                              "offline")}


def test_single_node_gauges(tmp_path):
    mport = free_port()
    with BrokerProcess(data_dir=str(tmp_path / "d"),
                       settings={"kafkalite.metrics.port": str(mport)}) as bp:
        from kafka.protocol.admin import CreateTopicsRequest
        T = CreateTopicsRequest.CreatableTopic
        with open_socket(bp.bootstrap) as s:
            call(s, CreateTopicsRequest[7](topics=[T(
                name="solo", num_partitions=2, replication_factor=1, assignments=[],
                configs=[])], timeout_ms=15000, validate_only=False))
        g = gauges(mport)
    assert picked(g) == {"under": 0, "under_min": 0, "leaders": 2, "partitions": 2,
                         "active": 1, "offline": 0}
    assert g["changes"] == 0 and g["shrinks"] == 0 and g["expands"] == 0 and g["legacy"] == 0


def settled_on(z, *live: int):
    """Whether every partition with a live replica is led by a live broker."""
    def settled() -> bool:
        return all(st.leader in live or not set(r) & set(live)
                   for st, r in zk_states(z).values())
    return settled


def test_cluster_gauges_before_and_after_the_controller_dies(zookeeper):
    connect = zkh.chroot_connect(zookeeper)
    mports = {i: free_port() for i in (1, 2, 3)}
    procs = {i: BrokerProcess(port=free_port_pair(), settings={
        "node.id": str(i), "zookeeper.connect": connect,
        "kafkalite.metrics.port": str(mports[i]),
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "zookeeper.connection.timeout.ms": str(CONNECT_MS)}) for i in (1, 2, 3)}
    z = None
    try:
        for b in procs.values():
            b.start()
        z = Zk(connect)
        registered(z, set(procs))
        ctrl = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
        assert ctrl in procs
        assert create(procs[ctrl].bootstrap, "orders", partitions=3, rf=3,
                      configs={"min.insync.replicas": "3"}).error_code == 0
        assert create(procs[ctrl].bootstrap, "single", partitions=3, rf=1).error_code == 0

        def all_match(live: set[int], controller: int):
            want = expected(z, live, controller)
            seen = {i: gauges(mports[i]) for i in live}
            return want, seen, all(picked(seen[i]) == want[i] for i in live)
        want, before, ok = eventually(lambda: all_match(set(procs), ctrl), lambda r: r[2],
                                      timeout=WAIT_S, interval=0.3)
        assert {i: picked(g) for i, g in before.items()} == want
        assert sum(w["leaders"] for w in want.values()) == 6
        assert sum(w["partitions"] for w in want.values()) == 12
        assert all(g["under"] == g["offline"] == 0 for g in before.values())
        for g in before.values():
            assert g["changes"] >= 1 and g["shrinks"] is not None and g["expands"] is not None

        # a follower dies: the controller moves its leaders and takes it out of the ISRs
        victim = max(set(procs) - {ctrl})
        procs[victim].kill()
        live = set(procs) - {victim}

        def settled():
            states = zk_states(z)
            return all((st.leader in live and victim not in st.isr) or r == (victim,)
                       for st, r in states.values())
        assert eventually(settled, bool, timeout=WAIT_S)
        want, after, ok = eventually(lambda: all_match(live, ctrl), lambda r: r[2],
                                     timeout=WAIT_S, interval=0.3)
        assert {i: picked(g) for i, g in after.items()} == want
        # its RF=1 partition is the one offline; every orders partition lost a replica, so
        # each is under-replicated (and under its min ISR of 3) where it is led
        assert after[ctrl]["offline"] == 1
        assert sum(g["under"] for g in after.values()) == 3
        assert sum(g["under_min"] for g in after.values()) == 3
        assert all(g["legacy"] == g["under"] for g in after.values())
        assert all(g["changes"] == before[i]["changes"] for i, g in after.items())

        # then the controller dies: the last broker takes over and has seen one more election
        procs[ctrl].kill()
        [last] = live - {ctrl}
        assert eventually(lambda: controller_id(z), lambda c: c == last, timeout=WAIT_S) == last
        live = {last}  # the new controller has moved every leader it can (as settled above)
        assert eventually(settled_on(z, last), bool, timeout=WAIT_S)
        want, final, ok = eventually(lambda: all_match({last}, last), lambda r: r[2],
                                     timeout=WAIT_S, interval=0.3)
        assert picked(final[last]) == want[last]
        assert final[last]["active"] == 1 and final[last]["offline"] == 2
        assert final[last]["changes"] == before[last]["changes"] + 1
    finally:
        if z is not None:
            z.close()
        for b in procs.values():
            b.kill()
            b.cleanup()
