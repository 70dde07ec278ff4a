# SCRAM credentials and client quotas in ZooKeeper (issue 17), Apache Kafka 3.8.0 in
# ZooKeeper mode against kafkalite, each on a chroot of its own of the session ZooKeeper: the
# same AlterUserScramCredentials / AlterClientQuotas calls leave the same znodes, byte for
# byte (paths, sanitized names, JSON key order, quota value forms, SCRAM credential text; the
# salts are given, so the derived keys match too), the same notifications in the same order,
# and the same clean-up of emptied entities. And the credentials and quotas Kafka wrote into
# its chroot (its broker's admin APIs, and `kafka-configs.sh --zookeeper`) work on kafkalite
# brokers started on that chroot.
from __future__ import annotations

from tests.cluster.test_entity_configs_zk import (SCRAM_SETTINGS, add_scram_user, can_log_in,
                                                  sasl)
from tests.cluster.test_membership import CONNECT_MS, SESSION_MS, WAIT_S, Zk
from tests.helpers import zookeeper as zkh
from tests.helpers.real_kafka import eventually, free_port_pair
from tests.integration.test_client_quotas import alter, describe
from kafkalite.testing import BrokerProcess

SHA256, SHA512 = 0, 1  # indexes into the mechanisms below


def scram(bootstrap: str, changes: list) -> None:
    """(user, mechanism index, iterations, salt, password) upserts; (user, index) deletes."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    mechs = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    made = [UserScramCredentialDeletion(c[0], mechs[c[1]]) if len(c) == 2 else
            UserScramCredentialUpsertion(c[0], ScramCredentialInfo(mechs[c[1]], c[2]), c[4],
                                         c[3]) for c in changes]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.alter_user_scram_credentials(made).values():
        assert f.result(WAIT_S) is None


def quota(bootstrap: str, entity: tuple, key: str, value: float | None) -> None:
    got = alter(bootstrap, [(entity, [(key, value or 0, value is None)])])
    assert [code for code, _, _ in got] == [0], got


def steps(bootstrap: str) -> None:
    odd = "al ice/é"  # sanitized: al%20ice%2F%C3%A9
    scram(bootstrap, [(odd, SHA256, 4096, b"saltsalt", b"pw"),
                      ("bob", SHA512, 8192, b"bobsalt1", b"pw")])
    quota(bootstrap, (("user", odd),), "producer_byte_rate", 1024)
    quota(bootstrap, (("user", odd),), "request_percentage", 12.5)
    quota(bootstrap, (("user", "bob"), ("client-id", "c:1")), "consumer_byte_rate", 2048)
    quota(bootstrap, (("user", None), ("client-id", None)), "consumer_byte_rate", 4096)
    quota(bootstrap, (("client-id", None),), "controller_mutation_rate", 3)
    quota(bootstrap, (("client-id", "cl*x"),), "producer_byte_rate", 3)
    quota(bootstrap, (("user", None),), "request_percentage", 12345678.5)
    quota(bootstrap, (("ip", "1.2.3.4"),), "connection_creation_rate", 5)
    scram(bootstrap, [("bob", SHA256, 4096, b"bobsalt2", b"pw")])
    quota(bootstrap, (("user", "bob"),), "producer_byte_rate", 100)
    scram(bootstrap, [("bob", SHA512)])
    quota(bootstrap, (("client-id", "cl*x"),), "producer_byte_rate", None)  # node cleaned
    quota(bootstrap, (("user", "u2"), ("client-id", "c2")), "producer_byte_rate", 7)
    quota(bootstrap, (("user", "u2"), ("client-id", "c2")), "producer_byte_rate", None)
    scram(bootstrap, [("zed", SHA256, 4096, b"zedsalt1", b"pw")])
    scram(bootstrap, [("zed", SHA256)])  # the last credential: the user's node goes


def config_tree(connect: str) -> dict:
    """Every znode under /config but the topics' and brokers' (path -> data), and the
    notifications' data in sequence order."""
    z = Zk(connect)
    try:
        out: dict = {}

        def walk(path: str) -> None:
            out[path] = z.client.get(path)[0]
            for child in sorted(z.client.get_children(path)):
                walk(f"{path}/{child}")
        for root in ("users", "clients", "ips"):
            walk(f"/config/{root}")
        names = sorted(z.client.get_children("/config/changes"))
        notes = [z.client.get(f"/config/changes/{n}")[0] for n in names]
        return {"znodes": out, "notifications": [n for n in notes if b'"topics/' not in n
                                                 and b'"brokers/' not in n]}
    finally:
        z.close()


def test_kafkalite_writes_the_znodes_kafka_writes(zookeeper):
    with zkh.kafka_on_zookeeper(zookeeper, (1,)) as (connect, kafka):
        steps(kafka[1].bootstrap)
        theirs = config_tree(connect)
    connect = zkh.chroot_connect(zookeeper)
    ours_broker = BrokerProcess(port=free_port_pair(), settings={
        "node.id": "1", "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "zookeeper.connection.timeout.ms": str(CONNECT_MS),
        "offsets.topic.replication.factor": "1"})
    try:
        ours_broker.start()
        steps(ours_broker.bootstrap)
        ours = config_tree(connect)
    finally:
        ours_broker.kill()
        ours_broker.cleanup()
    # The /config/<type> roots: Kafka creates its persistent paths with no data, kafkalite's
    # ZkClient.ensure_persistent_paths (cluster/zk.py, not this feature's) with empty data.
    roots = {f"/config/{t}" for t in ("users", "clients", "ips")}
    assert {p: ours["znodes"][p] or None for p in roots} == \
        {p: theirs["znodes"][p] for p in roots} == dict.fromkeys(roots)
    assert {p: d for p, d in ours["znodes"].items() if p not in roots} == \
        {p: d for p, d in theirs["znodes"].items() if p not in roots}
    assert ours["notifications"] == theirs["notifications"]
    assert "/config/users/al%20ice%2F%C3%A9" in ours["znodes"]


def test_credentials_and_quotas_kafka_wrote_work_on_kafkalite(zookeeper):
    """Kafka's chroot after its broker stopped: kafkalite brokers started on it let in a user
    kafka-configs.sh --zookeeper made and one Kafka's AlterUserScramCredentials made, and
    hold the quota Kafka's AlterClientQuotas set (Kafka 3.8's tool writes only users' SCRAM
    credentials and brokers' configs with --zookeeper)."""
    with zkh.kafka_on_zookeeper(zookeeper, (1,)) as (connect, kafka):
        add_scram_user(connect, "alice", "alice-secret")
        scram(kafka[1].bootstrap, [("bob", SHA256, 4096, b"bobsalt1", b"bob-secret")])
        quota(kafka[1].bootstrap, (("client-id", "app*1"),), "producer_byte_rate", 2048)
        kafka[1].stop()
        procs = []
        try:
            for i in (1, 2):
                b = BrokerProcess(port=free_port_pair(), settings={
                    "node.id": str(i), "zookeeper.connect": connect,
                    "zookeeper.session.timeout.ms": str(SESSION_MS),
                    "zookeeper.connection.timeout.ms": str(CONNECT_MS),
                    "offsets.topic.replication.factor": "1", **SCRAM_SETTINGS})
                b.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                           f"SASL_PLAINTEXT://127.0.0.1:{b.port + 1}")
                procs.append(b)
                b.start()
            for b in procs:
                for user in ("alice", "bob"):
                    assert eventually(lambda: can_log_in(sasl(b), user, f"{user}-secret"),
                                      bool, timeout=WAIT_S)
                assert not can_log_in(sasl(b), "bob", "wrong")
                assert describe(b.bootstrap, [("client-id", 0, "app*1")]) == (
                    0, "", [([("client-id", "app*1")], [("producer_byte_rate", 2048.0)])])
        finally:
            for b in procs:
                b.kill()
                b.cleanup()
