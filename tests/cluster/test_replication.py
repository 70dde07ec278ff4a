# Replication between kafkalite brokers (issue 17, design steps 6-7): three spawned brokers on
# the test's ZooKeeper chroot, the controller enabled, an RF=3 topic. Followers fetch from
# the leader, the leader keeps the HW and writes ISR changes to the state znode itself, and
# acks=all waits for the ISR. Failures are SIGSTOP/SIGKILL of broker processes.
from __future__ import annotations

import glob
import os
import signal
import threading
import time

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_zk_admin_apis import controller_id, create, states
from tests.helpers.kbatch import batch_headers, call, fetch_raw, produce_raw, simple_batch
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

LAG_MS = 2000
TOPIC = "replicated"


def cluster(brokers, zk, topic_configs=None, **props):
    """Brokers 1-3 and an RF=3 one-partition topic whose ISR is complete:
    ({id: BrokerProcess}, kazoo session)."""
    settings = {"replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.wait.max.ms": "200",
                "replica.high.watermark.checkpoint.interval.ms": "300", **props}
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **settings)))
    z = zk()
    registered(z, {1, 2, 3})
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    row = create(procs[cid].bootstrap, TOPIC, partitions=1, rf=3, configs=topic_configs)
    assert row.error_code == 0
    assert set(isr(z)) == {1, 2, 3}
    with open_socket(procs[state(z).leader].bootstrap) as s:  # its view follows on its own
        assert eventually(lambda: fetch_raw(s, TOPIC, 0, 0).error_code, lambda c: c == 0,
                          timeout=WAIT_S) == 0
    return procs, z


def state(z) -> zkdata.PartitionState:
    return states(z, TOPIC, [0])[0]


def isr(z) -> tuple[int, ...]:
    return state(z).isr


def wait_isr(z, accept) -> tuple[int, ...]:
    return eventually(lambda: set(isr(z)), accept, timeout=WAIT_S)


def log_bytes(broker) -> bytes:
    """The partition's segment files, concatenated in offset order."""
    files = sorted(glob.glob(os.path.join(broker.data_dir, f"{TOPIC}-0", "*.log")))
    out = b""
    for f in files:
        with open(f, "rb") as fh:
            out += fh.read()
    return out


def bootstrap(procs) -> str:
    return ",".join(b.bootstrap for b in procs.values() if b.proc is not None)


def produce_all(servers: str, values, **extra) -> list:
    """acks=all through confluent-kafka; returns the delivery errors."""
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5,
                     "message.timeout.ms": 30000, **extra})
    errors = []
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(40) == 0
    return errors


def consume_all(servers: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": "g", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


POLL_MS = 20000


def long_poll(servers: str, offset: int, max_wait_ms: int):
    """One consumer Fetch waiting up to max_wait_ms: (partition answer, seconds taken)."""
    with open_socket(servers, timeout=max_wait_ms / 1000 + 10) as s:
        t0 = time.monotonic()
        part = fetch_raw(s, TOPIC, 0, offset, max_wait_ms=max_wait_ms)
        return part, time.monotonic() - t0


def stop(broker) -> None:
    broker.proc.send_signal(signal.SIGSTOP)


def resume(broker) -> None:
    broker.proc.send_signal(signal.SIGCONT)


def test_acks_all_records_land_identically_on_every_replica(brokers, zk):
    procs, z = cluster(brokers, zk)
    values = [b"v%d" % i for i in range(300)]
    assert produce_all(bootstrap(procs), values) == []
    leader = procs[state(z).leader]
    expected = log_bytes(leader)
    assert expected
    for b in procs.values():  # the followers hold the very same batches (offsets, epochs)
        assert eventually(lambda b=b: log_bytes(b), lambda d: d == expected,
                          timeout=WAIT_S) == expected
    epoch = state(z).leader_epoch
    assert {h.partition_leader_epoch for h in batch_headers(expected)} == {epoch}
    assert consume_all(bootstrap(procs), len(values)) == values
    for b in procs.values():  # every replica's HW reaches the end, checkpointed as Kafka's
        assert f"{TOPIC} 0 {len(values)}" in eventually(
            lambda b=b: hw_checkpoint(b), lambda t: f"{TOPIC} 0 {len(values)}" in t,
            timeout=WAIT_S).splitlines()


def hw_checkpoint(broker) -> str:
    try:
        with open(os.path.join(broker.data_dir, "replication-offset-checkpoint")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_consumers_read_nothing_above_the_high_watermark(brokers, zk):
    # the followers' sessions outlive their stop, and no shrink happens meanwhile
    procs, z = cluster(brokers, zk, **{"replica.lag.time.max.ms": "60000",
                                       "zookeeper.session.timeout.ms": "20000"})
    lead = state(z).leader
    with open_socket(procs[lead].bootstrap) as s:
        assert produce_raw(s, TOPIC, 0, simple_batch(3)).error_code == 0  # acks=all: HW 3
        followers = [b for i, b in procs.items() if i != lead]
        for b in followers:
            stop(b)
        try:
            r = produce_raw(s, TOPIC, 0, simple_batch(2), acks=1, correlation_id=2)
            assert (r.error_code, r.base_offset) == (0, 3)  # in the leader's log, LEO 5
            part = fetch_raw(s, TOPIC, 0, 0, correlation_id=3)
            assert part.high_watermark == 3
            assert [h.last_offset + 1 for h in batch_headers(part.records)] == [3]
            above = fetch_raw(s, TOPIC, 0, 3, correlation_id=4)
            assert (above.error_code, above.records or b"") == (0, b"")
            polled: list = []  # a consumer's long poll above the HW: woken when it moves
            poll = threading.Thread(target=lambda: polled.append(long_poll(
                procs[lead].bootstrap, 3, POLL_MS)), daemon=True)
            poll.start()
        finally:
            for b in followers:
                resume(b)
        poll.join(POLL_MS / 1000 + 10)
        part, took = polled[0]
        assert [h.base_offset for h in batch_headers(part.records)] == [3]
        assert part.high_watermark == 5
        assert took < POLL_MS / 1000 / 2  # answered when the HW moved, not at its max wait


def test_a_stopped_follower_leaves_the_isr_and_rejoins(brokers, zk):
    # a session longer than the lag: the leader's shrink, not the controller, removes it
    procs, z = cluster(brokers, zk, **{"zookeeper.session.timeout.ms": "20000"})
    lead = state(z).leader
    victim = next(i for i in procs if i != lead)
    before = len(z.client.get_children(zkdata.ISR_CHANGE_NOTIFICATION))
    stop(procs[victim])
    try:
        # An idle follower at the leader's log end stays in sync (as Kafka's isCaughtUp):
        # appends are what it falls behind on. acks=all waits for the shrink, then succeeds.
        live = bootstrap({i: b for i, b in procs.items() if i != victim})
        assert produce_all(live, [b"while-stopped-%d" % i for i in range(20)]) == []
        assert set(isr(z)) == set(procs) - {victim}
        assert state(z).leader == lead  # the leader wrote it, keeping its epoch
        assert produce_all(live, [b"after-shrink-%d" % i for i in range(20)]) == []
    finally:
        resume(procs[victim])
    assert wait_isr(z, lambda s: s == set(procs)) == set(procs)
    assert log_bytes(procs[victim]) == log_bytes(procs[lead])
    notes = z.client.get_children(zkdata.ISR_CHANGE_NOTIFICATION)
    if len(notes) > before:  # a controller that does not delete them yet leaves them here
        data = z.client.get(f"{zkdata.ISR_CHANGE_NOTIFICATION}/{sorted(notes)[-1]}")[0]
        assert zkdata.decode_isr_change(data) == {(TOPIC, 0)}


def test_min_insync_replicas_refuses_acks_all_with_two_brokers_stopped(brokers, zk):
    procs, z = cluster(brokers, zk, topic_configs={"min.insync.replicas": "2"},
                       **{"zookeeper.session.timeout.ms": "20000"})
    lead = state(z).leader
    others = [b for i, b in procs.items() if i != lead]
    with open_socket(procs[lead].bootstrap) as s:
        assert produce_raw(s, TOPIC, 0, simple_batch(1)).error_code == 0
        for b in others:
            stop(b)
        try:
            r = produce_raw(s, TOPIC, 0, simple_batch(1), acks=1, correlation_id=2)
            assert r.error_code == 0  # acks=1 is not refused; the followers fall behind
            assert wait_isr(z, lambda i: i == {lead}) == {lead}
            # The leader takes the shrunk ISR when its own write's answer comes back, which a
            # loaded machine can deliver after the znode is seen here; until then an acks=all
            # append is accepted and times out waiting for the stopped followers, as in Kafka
            # while an ISR change is pending. Bounded: a few request timeouts at most.
            codes = []
            for attempt in range(4):
                r = produce_raw(s, TOPIC, 0, simple_batch(1), correlation_id=3 + attempt)
                codes.append(r.error_code)
                if r.error_code != ErrorCode.request_timed_out:
                    break
            assert codes[-1] == ErrorCode.not_enough_replicas, codes
        finally:
            for b in others:
                resume(b)


def test_leader_killed_while_producing_loses_and_duplicates_nothing(brokers, zk):
    procs, z = cluster(brokers, zk, topic_configs={"min.insync.replicas": "2"})
    first = state(z)
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": bootstrap(procs), "acks": "all",
                     "enable.idempotence": True, "linger.ms": 2,
                     "message.timeout.ms": 40000})
    acked: list[bytes] = []
    failed: list = []

    def report(err, msg):
        (failed.append(err) if err is not None else acked.append(msg.value()))
    killed = threading.Event()

    def kill_leader():
        while len(acked) < 200:
            time.sleep(0.01)
        procs[first.leader].kill()
        killed.set()
    killer = threading.Thread(target=kill_leader, daemon=True)
    killer.start()
    deadline = time.monotonic() + 60
    i = 0
    while (i < 600 or not killed.is_set()) and time.monotonic() < deadline:
        p.produce(TOPIC, value=b"m%d" % i, partition=0, on_delivery=report)
        p.poll(0)
        i += 1
        time.sleep(0.002)
    assert p.flush(45) == 0
    killer.join(5)
    assert killed.is_set()
    new = eventually(lambda: state(z), lambda s: s.leader not in (first.leader, -1),
                     timeout=WAIT_S)
    assert new.leader_epoch > first.leader_epoch and new.leader in first.isr
    live = {k: b for k, b in procs.items() if k != first.leader}
    got = consume_all(bootstrap(live), len(acked), timeout=40)
    assert len(got) == len(set(got))  # no duplicate
    assert set(acked) <= set(got)  # no acknowledged record lost
    assert not failed, failed[:3]


def test_a_zombie_leader_acknowledges_nothing_and_its_tail_is_truncated(brokers, zk):
    """The leader stopped past its session: the controller elects another from the ISR. A
    produce it finds queued when it resumes is never acknowledged (its followers fetch from
    the new leader: its HW cannot pass it), and rejoining as a follower it truncates what it
    appended meanwhile (OffsetForLeaderEpoch), so its log is the new leader's again."""
    from kafka.protocol.producer import ProduceRequest
    from tests.helpers.kbatch import decode_response, recv_frame, request_bytes
    procs, z = cluster(brokers, zk)
    assert produce_all(bootstrap(procs), [b"before-%d" % i for i in range(50)]) == []
    first = state(z)
    zombie = procs[first.leader]
    Req = ProduceRequest[9]
    T = Req.TopicProduceData
    req = Req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[T(
        name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=simple_batch(
            1, tag=b"zombie"))])])
    with open_socket(zombie.bootstrap, timeout=30) as s:
        stop(zombie)
        try:
            s.sendall(request_bytes(req, 7))  # read by the zombie when it resumes
            new = eventually(lambda: state(z), lambda st: st.leader not in (first.leader, -1),
                             timeout=WAIT_S)
            assert new.leader_epoch > first.leader_epoch
        finally:
            resume(zombie)
        _corr, resp = decode_response(_produce_response(), 9, recv_frame(s))
        answer = resp.responses[0].partition_responses[0]
        assert answer.error_code != 0  # never acknowledged
    live = {i: b for i, b in procs.items() if i != first.leader}
    assert produce_all(bootstrap(live), [b"after-%d" % i for i in range(50)]) == []
    leader_log = log_bytes(procs[new.leader])
    assert eventually(lambda: log_bytes(zombie), lambda d: d == log_bytes(procs[new.leader]),
                      timeout=WAIT_S) == log_bytes(procs[new.leader])
    assert b"zombie" not in leader_log


def _produce_response():
    from kafka.protocol.api_header import ResponseClassRegistry
    return ResponseClassRegistry._response_class_registry[0]


def test_acks_all_waiting_when_a_follower_dies_is_answered_once_the_controller_drops_it(
        brokers, zk):
    """The controller removes a dead follower from the ISR with a new leader epoch, the same
    leader: the produce waiting for that follower succeeds then (no leadership change)."""
    procs, z = cluster(brokers, zk, **{"replica.lag.time.max.ms": "60000"})
    first = state(z)
    # not the controller: killing it would bring a controller failover into this test,
    # which is about the live controller dropping the dead follower
    cid = controller_id(z)
    victim = next(i for i in first.isr if i not in (first.leader, cid))
    with open_socket(procs[first.leader].bootstrap, timeout=30) as s:
        assert produce_raw(s, TOPIC, 0, simple_batch(1)).error_code == 0
        procs[victim].kill()
        from kafka.protocol.producer import ProduceRequest
        Req = ProduceRequest[9]
        T = Req.TopicProduceData
        req = Req(transactional_id=None, acks=-1, timeout_ms=20000, topic_data=[T(
            name=TOPIC, partition_data=[T.PartitionProduceData(index=0,
                                                               records=simple_batch(1))])])
        answer = call(s, req, 2).responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (0, 1)
    now = state(z)
    assert (now.leader, set(now.isr)) == (first.leader, set(first.isr) - {victim})
    assert now.leader_epoch > first.leader_epoch  # the controller's write, not the leader's


def test_a_follower_behind_the_leaders_log_start_starts_over_there(brokers, zk):
    """DeleteRecords moved the leader's log start past a stopped follower's log end (inside
    a batch): back, the follower gets OFFSET_OUT_OF_RANGE, restarts its log at that batch
    (truncate_fully_and_start_at), catches up, rejoins the ISR, and its log start follows
    the leader's."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient
    procs, z = cluster(brokers, zk, **{"zookeeper.session.timeout.ms": "20000"})
    lead = state(z).leader
    victim = next(i for i in procs if i != lead)
    assert produce_all(bootstrap(procs), [b"early-%d" % i for i in range(10)]) == []
    stop(procs[victim])
    try:
        live = bootstrap({i: b for i, b in procs.items() if i != victim})
        # the first of these may reach the stopped follower's socket (an answer to its long
        # poll); the second round, after the shrink, cannot
        assert produce_all(live, [b"late-%d" % i for i in range(20)]) == []
        assert victim not in isr(z)
        assert produce_all(live, [b"later-%d" % i for i in range(20)], **{
            "batch.num.messages": 20, "linger.ms": 200}) == []
        admin = AdminClient({"bootstrap.servers": procs[lead].bootstrap})
        (done,) = admin.delete_records([ck.TopicPartition(TOPIC, 0, 45)]).values()
        assert done.result(timeout=20).low_watermark == 45
    finally:
        resume(procs[victim])
    assert wait_isr(z, lambda s: s == set(procs)) == set(procs)
    leader_log = log_bytes(procs[lead])
    follower_log = eventually(lambda: log_bytes(procs[victim]),
                              lambda d: d and leader_log.endswith(d), timeout=WAIT_S)
    first = batch_headers(follower_log)[0]
    # the leader's batches from the one holding its log start, nothing before
    assert leader_log.endswith(follower_log) and first.base_offset <= 45 <= first.last_offset
    assert batch_headers(follower_log)[-1].last_offset == 49
    with open_socket(procs[lead].bootstrap) as s:
        assert fetch_raw(s, TOPIC, 0, 45).log_start_offset == 45
