# Brokers talking to each other over SASL_SSL (issue 17): three kafkalite brokers on the
# test's ZooKeeper chroot, each with a PLAINTEXT and a SASL_SSL listener,
# inter.broker.listener.name=SASL_SSL with SCRAM-SHA-512 as User:broker, and the ACL
# authorizer on with no ACL at all (super.users: the broker and the admin user): a follower
# connecting in PLAINTEXT (User:ANONYMOUS) would be refused CLUSTER_ACTION, so replication,
# the transaction markers and controlled shutdown only work over the authenticated listener.
# Clients connect to SASL_SSL as User:admin.
from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.test_membership import (WAIT_S, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_replication import log_bytes
from tests.cluster.test_zk_admin_apis import controller_id, states
from tests.helpers.certs import make_pki
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually

TOPIC = "replicated"  # the name test_replication.log_bytes reads
BROKER_PASSWORD = "broker-secret"
ADMIN = ("admin", "admin-secret")
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="{user}" password="{password}";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def secure_settings(pki, password: str = BROKER_PASSWORD) -> dict[str, str]:
    return {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            SCRAM_JAAS.format(user="broker", password=password),
        # the SCRAM credentials every broker verifies logins against
        "kafkalite.sasl.scram.users": f"broker:{BROKER_PASSWORD},{ADMIN[0]}:{ADMIN[1]}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:admin",
        "replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
    }


def start_secure(brokers, pki, ids=(1, 2, 3), **over: str) -> dict:
    procs = dict(zip(ids, brokers(*ids, start=False, **{**secure_settings(pki), **over})))
    for b in procs.values():
        b.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                   f"SASL_SSL://127.0.0.1:{b.port + 1}")
        b.start()
    return procs


def client_conf(pki, procs) -> dict:
    return {"bootstrap.servers": ",".join(f"127.0.0.1:{b.port + 1}" for b in procs.values()
                                          if b.proc is not None),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": ADMIN[0], "sasl.password": ADMIN[1], "ssl.ca.location": pki.ca}


def create_topic(conf: dict, name: str, assignment: list[list[int]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)],
                                 request_timeout=15).values():
        f.result(WAIT_S)


def isr(z, name: str = TOPIC, partition: int = 0) -> set[int]:
    got = states(z, name, [partition])
    return set(got[partition].isr) if partition in got else set()


def replica_fetch(bootstrap: str, replica_id: int, name: str):
    """A follower's Fetch (v12, replica_id) over PLAINTEXT: its partition answer."""
    from kafka.protocol.consumer import FetchRequest
    Req = FetchRequest[12]
    T = Req.FetchTopic
    req = Req(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
              isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
              rack_id="", topics=[T(topic=name, partitions=[T.FetchPartition(
                  partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                  current_leader_epoch=-1, log_start_offset=-1)])])
    with open_socket(bootstrap) as s:
        return call(s, req).responses[0].partitions[0]


def produce(conf: dict, name: str, values: list[bytes], partition: int = 0) -> list:
    import confluent_kafka as ck
    p = ck.Producer({**conf, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
    errors: list = []
    for v in values:
        p.produce(name, value=v, partition=partition,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(40) == 0
    return errors


def test_replicas_copy_the_leader_over_sasl_ssl_with_the_authorizer_on(brokers, zk, pki):
    from kafkalite.wire.errors import ErrorCode
    procs = start_secure(brokers, pki)
    z = zk()
    registered(z, {1, 2, 3})
    conf = client_conf(pki, procs)
    create_topic(conf, TOPIC, [[1, 2, 3]])
    values = [f"v{i}".encode() * 20 for i in range(300)]
    assert produce(conf, TOPIC, values) == []
    assert eventually(lambda: isr(z), lambda s: s == {1, 2, 3}, timeout=WAIT_S) == {1, 2, 3}
    leader_bytes = log_bytes(procs[1])
    assert len(leader_bytes) > sum(len(v) for v in values)
    for i in (2, 3):  # every follower holds the leader's very bytes
        assert eventually(lambda i=i: log_bytes(procs[i]), lambda b: b == leader_bytes,
                          timeout=WAIT_S) == leader_bytes
    # the same Fetch from an unauthenticated replica is refused: the followers above were not
    answer = replica_fetch(procs[1].bootstrap, 2, TOPIC)
    assert answer.error_code == ErrorCode.topic_authorization_failed


def test_a_broker_with_a_wrong_inter_broker_password_stays_out_of_the_isr(brokers, zk, pki):
    procs = start_secure(brokers, pki, ids=(1, 2))
    (bad,) = brokers(3, start=False, **{**secure_settings(pki, password="not-the-password"),
                                        "controlled.shutdown.max.retries": "1"})
    bad.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{bad.port},"
                                 f"SASL_SSL://127.0.0.1:{bad.port + 1}")
    bad.start()
    procs[3] = bad
    z = zk()
    registered(z, {1, 2, 3})
    conf = client_conf(pki, procs)
    create_topic(conf, TOPIC, [[1, 2, 3]])  # led by broker 1 (first replica)
    assert produce(conf, TOPIC, [b"x" * 100] * 50) == []
    assert eventually(lambda: isr(z), lambda s: s == {1, 2}, timeout=WAIT_S) == {1, 2}
    # the leader says why: the follower's failed logins, then the ISR shrink
    leader_log = eventually(procs[1].read_log, lambda t: "Shrinking ISR" in t, timeout=WAIT_S)
    assert "Shrinking ISR" in leader_log
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512") in leader_log
    assert "login to 127.0.0.1" in bad.read_log()  # the follower says why it cannot fetch
    bad.stop()
    bad.settings.update(secure_settings(pki))  # the right password: it catches up, rejoins
    bad.start()
    assert eventually(lambda: isr(z), lambda s: s == {1, 2, 3}, timeout=WAIT_S) == {1, 2, 3}
    assert eventually(lambda: log_bytes(bad), lambda b: b == log_bytes(procs[1]),
                      timeout=WAIT_S) == log_bytes(procs[1])


def consume_committed(conf: dict, name: str, expected: int) -> list[bytes]:
    import confluent_kafka as ck
    c = ck.Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    got: list[bytes] = []
    try:
        c.subscribe([name])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(got) < expected:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_a_transaction_commits_with_markers_sent_over_sasl_ssl(brokers, zk, pki):
    import confluent_kafka as ck
    procs = start_secure(brokers, pki)
    z = zk()
    registered(z, {1, 2, 3})
    eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    conf = client_conf(pki, procs)
    # one partition led by each broker: whoever coordinates, two leaders are elsewhere
    create_topic(conf, "payments", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    p = ck.Producer({**conf, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
                     "linger.ms": 5})
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    sent = [f"p{part}-{i}".encode() for part in range(3) for i in range(5)]
    for v in sent:
        p.produce("payments", value=v, partition=int(v[1:2]))
    assert p.flush(WAIT_S) == 0
    p.commit_transaction(WAIT_S)
    # read_committed sees a partition's records only once its leader wrote the COMMIT marker
    assert sorted(consume_committed(conf, "payments", len(sent))) == sorted(sent)
