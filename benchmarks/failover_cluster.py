# The clusters benchmarks/failover_time.py fails over: 3 kafkalite brokers and 3 Apache Kafka
# 3.8.0 brokers in ZooKeeper mode (tests/helpers/zookeeper.py's ZkModeKafka), each cluster
# under a chroot of its own of one ZooKeeper server, with the same session timeout and
# replica settings. A `Cluster` also keeps a kazoo session on its chroot whose watches stamp,
# on the benchmark's monotonic clock, every change of one partition's state znode and of the
# registered broker set: that is how "the new leader written in ZooKeeper" and "the dead
# broker's znode gone" are timed.
from __future__ import annotations

import contextlib
import signal
import threading
import time
import uuid
from typing import Callable, Iterator

from kafkalite.cluster import zkdata

BROKER_IDS = (1, 2, 3)


def shared_settings(session_ms: int) -> dict[str, str]:
    """What both clusters are given: failover follows the session timeout; the leader goes
    back home only when the benchmark asks (ElectLeaders), never on a rebalance timer."""
    return {"zookeeper.session.timeout.ms": str(session_ms),
            "replica.lag.time.max.ms": "10000",
            "replica.fetch.wait.max.ms": "500",
            "controlled.shutdown.enable": "true",
            "auto.leader.rebalance.enable": "false",
            "unclean.leader.election.enable": "false"}


class Cluster:
    """Three brokers of one kind on one chroot, and the watches on it."""

    def __init__(self, name: str, connect: str, brokers: dict):
        from kazoo.client import KazooClient
        self.name, self.connect, self.brokers = name, connect, brokers
        self.zk = KazooClient(hosts=connect, timeout=10.0)
        self.zk.start(timeout=15.0)
        self.state_events: list[tuple[float, zkdata.PartitionState]] = []
        self.broker_events: list[tuple[float, frozenset[int]]] = []
        self._lock = threading.Lock()
        self._watched: str | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def live(self) -> frozenset[int]:
        children = self.zk.get_children(zkdata.BROKER_IDS) \
            if self.zk.exists(zkdata.BROKER_IDS) else []
        return frozenset(int(c) for c in children)

    def controller(self) -> int | None:
        try:
            return zkdata.ControllerRegistration.decode(self.zk.get(zkdata.CONTROLLER)[0]).broker_id
        except Exception:  # NoNodeError: between two controllers
            return None

    def state(self, topic: str) -> zkdata.PartitionState | None:
        path = zkdata.partition_state_path(topic, 0)
        if self.zk.exists(path) is None:
            return None
        return zkdata.PartitionState.decode(self.zk.get(path)[0])

    def watch(self, topic: str) -> None:
        """Stamp every change of `topic`-0's state znode and of /brokers/ids from now on
        (kazoo re-arms both watches itself)."""
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch
        self._watched = topic

        def on_state(data, _stat) -> None:
            if data and self._watched == topic:
                with self._lock:
                    self.state_events.append((time.monotonic(), zkdata.PartitionState.decode(data)))

        def on_brokers(children) -> None:
            with self._lock:
                self.broker_events.append((time.monotonic(), frozenset(int(c) for c in children)))
        DataWatch(self.zk, zkdata.partition_state_path(topic, 0), on_state)
        ChildrenWatch(self.zk, zkdata.BROKER_IDS, on_brokers)

    def first_state(self, since: float, accept: Callable[[zkdata.PartitionState], bool]
                    ) -> float | None:
        with self._lock:
            return next((t for t, s in self.state_events if t >= since and accept(s)), None)

    def first_gone(self, since: float, broker: int) -> float | None:
        with self._lock:
            return next((t for t, live in self.broker_events
                         if t >= since and broker not in live), None)

    def signal(self, broker: int, sig: int) -> None:
        self.brokers[broker].proc.send_signal(sig)

    def restart(self, broker: int, exit_timeout: float = 60.0) -> None:
        """Wait (bounded) for the signalled broker to exit, then start it on its data."""
        b = self.brokers[broker]
        try:
            b.proc.wait(exit_timeout)
        except Exception:  # subprocess.TimeoutExpired: a shutdown that hangs is killed
            b.proc.send_signal(signal.SIGKILL)
            b.proc.wait(10)
        b.proc = None
        b.start()

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()
        for b in self.brokers.values():
            if b.proc is not None:
                b.proc.send_signal(signal.SIGCONT)
            b.cleanup()


def wait_for(probe: Callable[[], object], accept: Callable[[object], bool], timeout: float,
             what: str, interval: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if accept(got):
            return got
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s (last seen: {got!r})")
        time.sleep(interval)


def _settled(c: Cluster, timeout: float) -> Cluster:
    wait_for(c.live, lambda live: live == frozenset(BROKER_IDS), timeout, f"{c.name}: brokers")
    wait_for(c.controller, lambda cid: cid in BROKER_IDS, timeout, f"{c.name}: controller")
    return c


@contextlib.contextmanager
def zookeeper_server() -> Iterator[str]:
    from tests.helpers.zookeeper import ZooKeeperProcess, unavailable_reason
    if (reason := unavailable_reason()) is not None:
        raise SystemExit(f"cannot run the clusters: {reason}")
    zk = ZooKeeperProcess()
    try:
        zk.start(timeout=60)
        yield zk.connect
    finally:
        zk.stop()
        zk.cleanup()


@contextlib.contextmanager
def _cluster(name: str, connect: str, make: Callable[[int], object], settle_s: float
             ) -> Iterator[Cluster]:
    """BROKER_IDS made by `make(id)` and started one by one, then settled; all stopped and
    removed afterwards, also when one failed to start."""
    made: dict = {}
    cluster = None
    try:
        for i in BROKER_IDS:
            made[i] = make(i)
            made[i].start()
        cluster = _settled(Cluster(name, connect, made), settle_s)
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        else:
            for b in made.values():
                b.cleanup()


def kafkalite_cluster(zookeeper: str, session_ms: int) -> contextlib.AbstractContextManager:
    from kafkalite.testing import BrokerProcess
    from tests.helpers.real_kafka import free_port_pair
    connect = f"{zookeeper}/kafkalite-{uuid.uuid4().hex[:8]}"
    return _cluster("kafkalite", connect, lambda i: BrokerProcess(port=free_port_pair(), settings={
        "node.id": str(i), "zookeeper.connect": connect, **shared_settings(session_ms)}), 60)


def kafka_cluster(zookeeper: str, session_ms: int) -> contextlib.AbstractContextManager:
    from tests.helpers.zookeeper import ZkModeKafka
    connect = f"{zookeeper}/kafka-{uuid.uuid4().hex[:8]}"
    return _cluster("kafka 3.8.0", connect, lambda i: ZkModeKafka(
        connect, broker_id=i, settings=shared_settings(session_ms)), 90)
