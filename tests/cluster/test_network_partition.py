# Network partitions (issue 17): three kafkalite brokers, each in a network namespace of its
# own with its own address (tests/helpers/netns.py), a ZooKeeper of the test's own on the
# bridge's address in the root namespace, an RF=3 topic with min.insync.replicas=2 and 3 s
# ZooKeeper sessions. The partitions are iptables DROP rules inside the namespaces:
#   a. the partition leader isolated from everything, a producer inside its namespace still
#      talking to it and one in another namespace producing all along;
#   b. a follower cut from the leader only (ZooKeeper and the third broker still reachable);
#   c. the controller isolated.
# The scenarios take a Cluster, so tests/cluster/test_network_partition_vs_kafka.py runs the
# very same ones against three Kafka 3.8 brokers in ZooKeeper mode placed the same way.
#
# Run as a script (`python test_network_partition.py produce BOOTSTRAP PREFIX OUT`) it is the
# producer the tests start inside a namespace: acks=all, one value at a time, each delivery
# report a line `ack VALUE MONOTONIC` or `err VALUE MONOTONIC ERROR` in OUT (CLOCK_MONOTONIC
# is the machine's, so the test compares those times with its own); SIGTERM ends it (what is
# undelivered then is purged: `err ... _PURGE_QUEUE`, never acknowledged).
from __future__ import annotations

import dataclasses
import glob
import os
import re
import signal
import subprocess
import sys
import time
from typing import Callable, Iterator

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":
    sys.path.insert(0, REPO)

from kafkalite.cluster import zkdata  # noqa: E402
from kafkalite.testing import BrokerProcess  # noqa: E402
from kafkalite.wire.errors import ErrorCode  # noqa: E402
from tests.cluster.test_membership import Zk, registered  # noqa: E402
from tests.cluster.test_replication import TOPIC, produce_all  # noqa: E402
from tests.cluster.test_replication_vs_kafka import create_led  # noqa: E402
from tests.cluster.test_zk_admin_apis import (controller_epoch, controller_id,  # noqa: E402
                                              create, states)
from tests.helpers import netns  # noqa: E402
from tests.helpers import zookeeper as zkh  # noqa: E402
from tests.helpers.kbatch import call, fetch_raw  # noqa: E402
from tests.helpers.kbatch import connect as open_socket  # noqa: E402
from tests.helpers.real_kafka import eventually, free_port_pair  # noqa: E402

NAMES = {1: "b1", 2: "b2", 3: "b3"}
SESSION_MS = 3000
LAG_MS = 2000
WAIT_S = 40.0  # bound of every wait: a session timeout, an election, a JVM's reactions
SETTINGS = {"zookeeper.session.timeout.ms": str(SESSION_MS),
            "replica.lag.time.max.ms": str(LAG_MS),
            "auto.leader.rebalance.enable": "false"}
VALUE = re.compile(rb"(?:in|out)-\d{6}")


@dataclasses.dataclass
class Cluster:
    procs: dict[int, BrokerProcess]
    z: Zk
    net: netns.Partitions
    partition_dir: Callable[[BrokerProcess], str]  # where a broker keeps TOPIC-0

    def bootstrap(self, ids=None) -> str:
        return ",".join(self.procs[i].bootstrap for i in (ids or self.procs))

    def state(self) -> zkdata.PartitionState:
        return states(self.z, TOPIC, [0])[0]

    def log(self, i: int) -> bytes:
        """TOPIC-0's segment files on broker i, concatenated in offset order."""
        out = b""
        for path in sorted(glob.glob(os.path.join(self.partition_dir(self.procs[i]), "*.log"))):
            with open(path, "rb") as f:
                out += f.read()
        return out


# --- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def net() -> Iterator[netns.Partitions]:
    """The namespaces, shared by a module's tests (each cluster fixture heals at its end)."""
    made = netns.partitions(list(NAMES.values()))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def zk_on_bridge(net, tmp_path_factory) -> Iterator[str]:
    """A ZooKeeper of the module's own listening on the bridge's address (each cluster on a
    chroot of its own): every namespace reaches it until a partition says otherwise."""
    if (reason := zkh.unavailable_reason()) is not None:
        pytest.skip(reason)
    server = zkh.ZooKeeperProcess(data_dir=str(tmp_path_factory.mktemp("zk")),
                                  host=net.bridge_address)
    try:
        yield server.start().connect
    finally:
        server.cleanup()


def keep_logs(procs: dict, where) -> None:
    """Each broker's log beside the test's other files (pytest's basetemp), for a failure."""
    for i, b in procs.items():
        (where / f"broker-{i}.log").write_text(b.read_log())


@pytest.fixture
def lite(net, zk_on_bridge, tmp_path) -> Iterator[Cluster]:
    connect = zkh.chroot_connect(zk_on_bridge)
    procs = {i: BrokerProcess(port=free_port_pair(), host=net.address(n), prefix=net.prefix(n),
                              settings={"node.id": str(i), "zookeeper.connect": connect,
                                        "replica.fetch.wait.max.ms": "200", **SETTINGS})
             for i, n in NAMES.items()}
    try:
        for b in procs.values():
            b.start()
        z = Zk(connect)
        try:
            registered(z, set(procs))
            yield Cluster(procs, z, net, lambda b: os.path.join(b.data_dir, f"{TOPIC}-0"))
        finally:
            z.close()
    finally:
        net.heal()  # whatever the test left: the next one starts on the full mesh
        keep_logs(procs, tmp_path)
        for b in procs.values():
            b.kill()
            b.cleanup()


# --- the producer inside a namespace -------------------------------------------------------

class Producer:
    """The script's producer, spawned inside `name`'s namespace."""

    def __init__(self, c: Cluster, name: str, prefix: str, out: str):
        self.out = out
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
        self.proc = c.net.run_in(name, [sys.executable, os.path.abspath(__file__), "produce",
                                        c.bootstrap(), prefix, out], env=env,
                                 stdin=subprocess.DEVNULL)

    def reports(self) -> list[tuple[str, bytes, float]]:
        try:
            with open(self.out, "rb") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        return [(k.decode(), v, float(t)) for k, v, t, *_ in
                (line.split(b" ") for line in lines if line.count(b" ") >= 2)]

    def acked(self, after: float = 0.0) -> list[bytes]:
        return [v for k, v, t in self.reports() if k == "ack" and t > after]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def produce_main(bootstrap: str, prefix: str, out: str) -> None:
    import confluent_kafka as ck
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "message.timeout.ms": 120000, "enable.idempotence": False,
                     # a broker cut off answers nothing: without a bound on each request
                     # (socket.timeout.ms bounds Metadata) and a periodic metadata refresh,
                     # the client would keep asking it, and producing to it, for a minute
                     "request.timeout.ms": 5000, "socket.timeout.ms": 5000,
                     "topic.metadata.refresh.interval.ms": 1000})
    with open(out, "a", buffering=1) as f:
        def report(err, msg) -> None:
            f.write(f"{'ack' if err is None else 'err'} {msg.value().decode()} "
                    f"{time.monotonic():.6f}{'' if err is None else ' ' + err.name()}\n")
        for i in range(200_000):  # bounded: SIGTERM ends it long before
            if stopping:
                break
            p.produce(TOPIC, value=f"{prefix}-{i:06d}".encode(), partition=0,
                      on_delivery=report)
            p.poll(0.02)
        p.flush(1)
        p.purge()
        p.flush(1)
    os._exit(0)  # librdkafka's teardown may wait on an unreachable broker


# --- the scenarios -------------------------------------------------------------------------

def topic_led_by(c: Cluster, lead: int) -> zkdata.PartitionState:
    """TOPIC on all three brokers, `lead` first, min.insync.replicas=2, its ISR complete and
    its leader serving."""
    cid = controller_id(c.z)
    replicas = [lead, *(i for i in c.procs if i != lead)]
    row = eventually(lambda: create_led(c.procs[cid].bootstrap, replicas),
                     lambda r: r.error_code in (0, ErrorCode.topic_already_exists),
                     timeout=WAIT_S)
    assert row.error_code in (0, ErrorCode.topic_already_exists)
    first = eventually(lambda: states(c.z, TOPIC, [0]).get(0),
                       lambda s: s is not None and len(s.isr) == 3, timeout=WAIT_S)
    assert first.leader == lead and len(first.isr) == 3
    with open_socket(c.procs[lead].bootstrap) as s:
        assert eventually(lambda: fetch_raw(s, TOPIC, 0, 0).error_code, lambda e: e == 0,
                          timeout=WAIT_S) == 0
    return first


def settled_controller(c: Cluster) -> int:
    cid = eventually(lambda: controller_id(c.z), lambda i: i in c.procs, timeout=WAIT_S)
    assert cid in c.procs
    return cid


def leader_isolated(c: Cluster, tmp_path) -> None:
    """a. The leader (not the controller) isolated while producers write on both sides."""
    cid = settled_controller(c)
    lead = next(i for i in c.procs if i != cid)
    first = topic_led_by(c, lead)
    inside = Producer(c, NAMES[lead], "in", str(tmp_path / "inside.acks"))
    outside = Producer(c, NAMES[cid], "out", str(tmp_path / "outside.acks"))
    try:
        for p in (inside, outside):
            assert len(eventually(p.acked, lambda a: len(a) >= 20, timeout=WAIT_S)) >= 20
        c.net.isolate(NAMES[lead])
        new = eventually(c.state, lambda s: s.leader not in (lead, -1), timeout=WAIT_S)
        elected = time.monotonic()
        assert new.leader not in (lead, -1) and new.leader_epoch > first.leader_epoch
        assert lead not in new.isr
        # the other side keeps producing, to the new leader
        assert len(eventually(lambda: outside.acked(after=elected), lambda a: len(a) >= 20,
                              timeout=WAIT_S)) >= 20
        # the isolated leader took writes from its side that nobody else has
        divergent = eventually(
            lambda: set(VALUE.findall(c.log(lead))) - set(VALUE.findall(c.log(new.leader))),
            lambda d: any(v.startswith(b"in-") for v in d), timeout=WAIT_S)
        assert any(v.startswith(b"in-") for v in divergent)
        inside.stop()
        # and acknowledged none of them: it cannot shrink its ISR without ZooKeeper
        assert inside.acked(after=elected) == []
        assert not set(inside.acked()) & divergent
    finally:
        inside.stop()
        c.net.heal()
    healed = time.monotonic()
    try:
        back = eventually(c.state, lambda s: len(s.isr) == 3, timeout=WAIT_S)
        assert (back.leader, len(back.isr)) == (new.leader, 3)  # it rejoined as a follower
        assert len(eventually(lambda: outside.acked(after=healed),
                              lambda a: len(a) >= 5, timeout=WAIT_S)) >= 5
    finally:
        outside.stop()
    leader_log = c.log(new.leader)
    assert eventually(lambda: c.log(lead), lambda d: d == c.log(new.leader),
                      timeout=WAIT_S) == c.log(new.leader)  # its divergent tail truncated
    assert not divergent & set(VALUE.findall(leader_log))
    acked = set(inside.acked() + outside.acked())
    assert acked - consume_until(c.bootstrap(), acked) == set()  # 0 acknowledged records lost


def follower_cut_from_leader(c: Cluster) -> None:
    """b. A follower (not the controller) cut from the leader only."""
    cid = settled_controller(c)
    lead = next(i for i in c.procs if i != cid)
    victim = next(i for i in c.procs if i not in (cid, lead))
    first = topic_led_by(c, lead)
    c.net.cut(NAMES[victim], NAMES[lead])
    try:
        assert produce_all(c.bootstrap(), [b"cut-%d" % i for i in range(20)]) == []
        shrunk = eventually(c.state, lambda s: victim not in s.isr, timeout=WAIT_S)
        assert (shrunk.leader, set(shrunk.isr)) == (lead, {lead, cid})
        assert shrunk.leader_epoch == first.leader_epoch  # a shrink, not an election
        assert set(c.z.brokers()) == set(c.procs)  # nobody lost its session
        assert produce_all(c.bootstrap(), [b"shrunk-%d" % i for i in range(20)]) == []
    finally:
        c.net.heal()
    back = eventually(c.state, lambda s: len(s.isr) == 3, timeout=WAIT_S)
    assert (back.leader, set(back.isr)) == (lead, set(c.procs))
    assert eventually(lambda: c.log(victim), lambda d: d == c.log(lead),
                      timeout=WAIT_S) == c.log(lead)
    assert produce_all(c.bootstrap(), [b"healed-%d" % i for i in range(20)]) == []


def controller_isolated(c: Cluster) -> int:
    """c. The controller isolated: another is elected; back, the old one is fenced. Returns
    the old controller's id."""
    from kazoo.exceptions import BadVersionError
    old = settled_controller(c)
    lead = next(i for i in c.procs if i != old)
    topic_led_by(c, lead)
    epoch, st = c.z.client.get(zkdata.CONTROLLER_EPOCH)
    c.net.isolate(NAMES[old])
    try:
        new = eventually(lambda: controller_id(c.z), lambda i: i not in (old, None),
                         timeout=WAIT_S)
        assert new not in (old, None) and controller_epoch(c.z) > int(epoch)
        assert produce_all(c.bootstrap([i for i in c.procs if i != old]),
                           [b"apart-%d" % i for i in range(20)]) == []
    finally:
        c.net.heal()
    registered(c.z, set(c.procs))
    # a write fenced on the epoch the old controller holds loses
    txn = c.z.client.transaction()
    txn.check(zkdata.CONTROLLER_EPOCH, st.version)
    txn.set_data(zkdata.CONTROLLER_EPOCH, epoch)
    assert isinstance(txn.commit()[0], BadVersionError)
    # the old controller knows: it names the new one and refuses controller work
    assert eventually(lambda: metadata_controller(c.procs[old].bootstrap),
                      lambda i: i == new, timeout=WAIT_S) == new
    assert create(c.procs[old].bootstrap, "after-heal", 1, 3).error_code \
        == ErrorCode.not_controller
    assert create(c.procs[new].bootstrap, "after-heal", 1, 3).error_code == 0
    assert controller_id(c.z) == new
    assert produce_all(c.bootstrap(), [b"healed-%d" % i for i in range(20)]) == []
    return old


def consume_until(servers: str, wanted: set[bytes]) -> set[bytes]:
    """TOPIC-0's values from the start, read until every one `wanted` is seen (bounded): a
    producer without idempotence may have written some twice, so no count is enough."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": "check",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    got: set[bytes] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while not wanted <= got and time.monotonic() < deadline:
            got.update(m.value() for m in c.consume(500, 0.5) if m.error() is None)
    finally:
        c.close()
    return got


def metadata_controller(bootstrap: str) -> int | None:
    from kafka.protocol.metadata import MetadataRequest
    try:
        with open_socket(bootstrap) as s:
            return call(s, MetadataRequest[1](topics=[])).controller_id
    except OSError:
        return None


# --- the helper itself ----------------------------------------------------------------------

def test_the_namespaces_go_at_close_and_a_dead_tests_leftovers_are_swept():
    def ours(tag: str) -> list[str]:
        shown = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                               timeout=30).stdout + subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
        return re.findall(rf"\b{re.escape(tag)}\S*", shown)
    net = netns.partitions(["x", "y"])
    try:
        assert len(ours(net.tag)) >= 4  # bridge, two namespaces, two host-side veths
        net.isolate("x")
        net.cut("x", "y")
    finally:
        net.close()
    assert eventually(lambda: ours(net.tag), lambda left: not left, timeout=10) == []
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names no process: what it made is a leftover
    leftover = f"kp{gone.pid}-0-x"
    subprocess.run(["ip", "netns", "add", leftover], check=True, timeout=30)
    try:
        assert leftover in netns.sweep()
    finally:
        subprocess.run(["ip", "netns", "del", leftover], capture_output=True, timeout=30)
    assert ours(leftover) == []


# --- kafkalite -----------------------------------------------------------------------------

def test_an_isolated_leader_acknowledges_nothing_and_rejoins_truncated(lite, tmp_path):
    leader_isolated(lite, tmp_path)


def test_a_follower_cut_from_the_leader_leaves_the_isr_and_rejoins(lite):
    follower_cut_from_leader(lite)


def test_an_isolated_controller_is_replaced_and_fenced(lite):
    old = controller_isolated(lite)
    # back, it learns its session expired and resigns (a write it tries before that, from
    # what it saw while partitioned, is fenced on its stale /controller_epoch version)
    assert "broker %d resigns as controller" % old in lite.procs[old].read_log()


if __name__ == "__main__" and sys.argv[1:2] == ["produce"]:
    produce_main(*sys.argv[2:5])
