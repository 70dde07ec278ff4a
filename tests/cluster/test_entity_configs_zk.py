# SCRAM credentials and client quotas in a 3-broker kafkalite cluster (issue 17), kept in
# ZooKeeper as Kafka's ZooKeeper mode keeps them (cluster/entity_configs.py): a user made with
# AlterUserScramCredentials at one broker logs in at every broker, a deletion at another
# broker shuts it out everywhere, a restarted broker (and one that was down meanwhile) knows
# the users; Kafka's documented `kafka-configs.sh --zookeeper` bootstrap of a SCRAM user works
# before and while the brokers run; a quota set at one broker is described and enforced at
# the others. Admin calls go to each broker's PLAINTEXT listener, logins to its
# SASL_PLAINTEXT one (SCRAM-SHA-256), each with a real client.
from __future__ import annotations

import os
import subprocess

import pytest

from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.helpers.real_kafka import anchor_dir, eventually

SCRAM_SETTINGS = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "inter.broker.listener.name": "PLAINTEXT",
}


def start_scram(brokers, ids=(1, 2, 3)) -> dict:
    """Brokers with PLAINTEXT on port and SASL_PLAINTEXT (SCRAM) on port + 1."""
    procs = dict(zip(ids, brokers(*ids, start=False, **SCRAM_SETTINGS)))
    for b in procs.values():
        b.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                   f"SASL_PLAINTEXT://127.0.0.1:{b.port + 1}")
        b.start()
    return procs


def sasl(b) -> str:
    return f"127.0.0.1:{b.port + 1}"


def can_log_in(bootstrap: str, user: str, password: str) -> bool:
    """A confluent-kafka client authenticates with SCRAM-SHA-256 and reads metadata; False
    once it reports the authentication failed (bounded: 6 s)."""
    from confluent_kafka import KafkaError as ClientError
    from confluent_kafka import Producer
    refused: list = []
    client = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                         "sasl.password": password, "log_level": 0,
                         "error_cb": lambda e: refused.append(
                             e.code() == ClientError._AUTHENTICATION)})
    for _ in range(20):
        try:
            client.list_topics(timeout=0.2)
            return True
        except Exception:  # KafkaException: no metadata (yet)
            client.poll(0.1)  # serves error_cb
            if any(refused):
                return False
    return False


def logins(procs: dict, user: str, password: str) -> dict[int, bool]:
    return {i: can_log_in(sasl(b), user, password) for i, b in procs.items()
            if b.proc is not None}


def alter_scram(bootstrap: str, user: str, password: bytes | None) -> None:
    """Upsert (password) or delete (None) the user's SCRAM-SHA-256 credential."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    m = ScramMechanism.SCRAM_SHA_256
    change = (UserScramCredentialDeletion(user, m) if password is None else
              UserScramCredentialUpsertion(user, ScramCredentialInfo(m, 4096), password))
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer
    for f in admin.alter_user_scram_credentials([change]).values():
        assert f.result(WAIT_S) is None


def everywhere(value: bool):
    return lambda seen: set(seen.values()) == {value}


def test_a_user_made_at_one_broker_logs_in_at_every_broker(brokers, zk):
    procs = start_scram(brokers)
    registered(zk(), {1, 2, 3})
    assert logins(procs, "alice", "alice-secret") == {1: False, 2: False, 3: False}
    alter_scram(procs[1].bootstrap, "alice", b"alice-secret")
    # broker 1 answered after its ZooKeeper write: the others follow the notification
    assert eventually(lambda: logins(procs, "alice", "alice-secret"), everywhere(True),
                      timeout=WAIT_S) == {1: True, 2: True, 3: True}
    assert logins(procs, "alice", "wrong") == {1: False, 2: False, 3: False}
    # a restarted broker reads the users at its start; one down meanwhile misses no change
    procs[3].stop()
    alter_scram(procs[1].bootstrap, "carol", b"carol-secret")
    procs[3].start()
    assert can_log_in(sasl(procs[3]), "alice", "alice-secret")
    assert can_log_in(sasl(procs[3]), "carol", "carol-secret")
    alter_scram(procs[2].bootstrap, "alice", None)
    assert eventually(lambda: logins(procs, "alice", "alice-secret"), everywhere(False),
                      timeout=WAIT_S) == {1: False, 2: False, 3: False}
    assert logins(procs, "carol", "carol-secret") == {1: True, 2: True, 3: True}


def kafka_configs(zk_connect: str, *args: str) -> None:
    """The anchor's kafka-configs.sh --zookeeper (Kafka's ZooKeeper-mode bootstrap)."""
    anchor = anchor_dir()
    if anchor is None:
        pytest.skip("no Kafka anchor (kafka-configs.sh)")
    log_dir = os.path.join("/tmp", f"kafka-configs-{os.getpid()}")
    r = subprocess.run([os.path.join(anchor, "bin", "kafka-configs.sh"), "--zookeeper",
                        zk_connect, "--alter", *args], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "LOG_DIR": log_dir,
                                         "KAFKA_HEAP_OPTS": "-Xmx128M"})
    assert r.returncode == 0, r.stderr[-2000:]


def add_scram_user(zk_connect: str, user: str, password: str) -> None:
    kafka_configs(zk_connect, "--add-config",
                  f"SCRAM-SHA-256=[iterations=8192,password={password}]",
                  "--entity-type", "users", "--entity-name", user)


def test_kafka_configs_bootstraps_scram_users_before_and_while_brokers_run(brokers, zk,
                                                                            connect):
    from kazoo.client import KazooClient
    root, _, chroot = connect.partition("/")
    made = KazooClient(hosts=root)  # Kafka's tool wants the chroot to exist
    made.start(timeout=10)
    made.ensure_path("/" + chroot)
    made.stop()
    made.close()
    add_scram_user(connect, "dave", "dave-secret")  # before any broker ran
    procs = start_scram(brokers)
    registered(zk(), {1, 2, 3})
    assert eventually(lambda: logins(procs, "dave", "dave-secret"), everywhere(True),
                      timeout=WAIT_S) == {1: True, 2: True, 3: True}
    add_scram_user(connect, "erin", "erin-secret")  # while they run
    assert eventually(lambda: logins(procs, "erin", "erin-secret"), everywhere(True),
                      timeout=WAIT_S) == {1: True, 2: True, 3: True}


def test_a_quota_set_at_one_broker_is_described_and_enforced_at_the_others(brokers, zk):
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.protocol.producer import ProduceRequest

    from tests.helpers.kbatch import (_response_cls, decode_response, recv_frame,
                                      request_bytes, simple_batch)
    from tests.helpers.kbatch import connect as open_socket
    from tests.integration.test_client_quotas import alter, describe
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3)))
    registered(zk(), {1, 2, 3})
    client = "slow-producer"
    assert describe(procs[3].bootstrap, [("client-id", 0, client)]) == (0, "", [])
    assert alter(procs[1].bootstrap, [((("client-id", client),),
                                       [("producer_byte_rate", 1024, False)])]) == [
        (0, None, [("client-id", client)])]
    assert eventually(lambda: describe(procs[3].bootstrap, [("client-id", 0, client)]),
                      lambda d: d[2], timeout=WAIT_S) == (
        0, "", [([("client-id", client)], [("producer_byte_rate", 1024.0)])])
    admin = AdminClient({"bootstrap.servers": procs[1].bootstrap})
    for f in admin.create_topics([NewTopic("q", num_partitions=1, replica_assignment=[[2]])]).values():
        f.result(WAIT_S)
    Req = ProduceRequest[9]
    T = Req.TopicProduceData
    req = Req(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        T(name="q", partition_data=[T.PartitionProduceData(
            index=0, records=simple_batch(4, size=1000))])])

    def throttles() -> list[int]:
        """4 KB produces of `client` at broker 2, the partition's leader, until one is
        throttled (Kafka's quota lets a new client burst to about 10 s of its rate)."""
        out: list[int] = []
        with open_socket(procs[2].bootstrap, timeout=30) as s:
            for corr in range(1, 7):
                s.sendall(request_bytes(req, corr, client_id=client))
                _, r = decode_response(_response_cls(req), 9, recv_frame(s))
                if r.responses[0].partition_responses[0].error_code == 0:
                    out.append(r.throttle_time_ms)
                if r.throttle_time_ms:
                    break
        return out
    seen = eventually(throttles, lambda t: t and max(t) > 0, timeout=WAIT_S)
    assert seen and max(seen) > 0, seen
    # removed at broker 3: the next client of that id at broker 2 is not throttled
    assert alter(procs[3].bootstrap, [((("client-id", client),),
                                       [("producer_byte_rate", 0, True)])]) == [
        (0, None, [("client-id", client)])]
    assert eventually(lambda: describe(procs[2].bootstrap, [("client-id", 0, client)]),
                      lambda d: d[2] == [], timeout=WAIT_S) == (0, "", [])
