# A secured three-broker cluster end to end (issue 17), as a user runs it: one SASL_PLAINTEXT
# listener with SCRAM-SHA-256 (the brokers replicate over it as User:broker), the ACL
# authorizer with allow.everyone.if.no.acl.found=false, super users broker and admin. The
# admin works with Kafka's own tools (kafka-configs.sh, kafka-acls.sh), each call at another
# broker; alice is a confluent-kafka client that only knows broker 3. Every change made at
# one broker must hold at every broker: a SCRAM user made at broker 1, ACLs added at broker 2
# and removed at broker 3 (enforced by the three partition leaders), the credential deleted
# at broker 1 (refused at every broker). The same scenario runs on three kafkalite brokers and
# on three Apache Kafka 3.8 brokers in ZooKeeper mode (the reference), each on a chroot of its
# own of the session ZooKeeper, where the admin's and the brokers' credentials are written
# before the brokers start, as `kafka-configs.sh --zookeeper` bootstraps them.
from __future__ import annotations

import collections
import contextlib
import os
import secrets
import subprocess
import time
import uuid
from typing import Iterator

import pytest

from kafkalite.cluster import zkdata
from kafkalite.cluster.entity_configs import encode_credential, encode_entity_config
from kafkalite.security.scram_store import make_credential, salted_password
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.helpers.real_kafka import anchor_dir, eventually, unavailable_reason
from tests.helpers.zookeeper import ZkModeKafka

SHA256 = 1  # scram_store.MECHANISMS: SCRAM-SHA-256
USERS = {"broker": "broker-secret", "admin": "admin-secret"}
ALICE = ("alice", "alice-secret")
TOPIC, GROUP, N = "orders", "alice-group", 30
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="{}" password="{}";')
SETTINGS = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        JAAS.format("broker", USERS["broker"]),
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    "super.users": "User:broker;User:admin",
    "offsets.topic.num.partitions": "3",
    "zookeeper.session.timeout.ms": "3000",
}
REFUSED_WRITE = {p: "TOPIC_AUTHORIZATION_FAILED" for p in range(3)}


def listeners(b) -> str:
    # PLAINTEXT (User:ANONYMOUS, no ACL: refused everything) only for the start-up probe
    return f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.port + 1}"


def bootstrap_users(zookeeper: str, chroot: str) -> None:
    """/config/users/<user> with a SCRAM-SHA-256 credential for the broker and the admin."""
    z = Zk(zookeeper)
    try:
        for user, password in USERS.items():
            salt = secrets.token_bytes(16)
            cred = make_credential(SHA256, salt,
                                   salted_password(SHA256, password, salt, 4096), 4096)
            z.client.create(chroot + zkdata.entity_config_path("users", user),
                            encode_entity_config({"SCRAM-SHA-256": encode_credential(cred)}),
                            makepath=True)
    finally:
        z.close()


def client(user: str, password: str, bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": password, "log_level": 0}


class Tools:
    """The anchor's bin/ scripts as the admin (a --command-config of SCRAM-SHA-256)."""

    def __init__(self, workdir: str):
        anchor = anchor_dir()
        if anchor is None:
            pytest.skip("no Kafka anchor (kafka-configs.sh, kafka-acls.sh)")
        self.bin = os.path.join(anchor, "bin")
        self.workdir = workdir
        self.config = os.path.join(workdir, "admin.properties")
        with open(self.config, "w") as f:
            f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.jaas.config={JAAS.format('admin', USERS['admin'])}\n")

    def __call__(self, tool: str, bootstrap: str, *args: str) -> str:
        r = subprocess.run([os.path.join(self.bin, tool), "--bootstrap-server", bootstrap,
                            "--command-config", self.config, *args],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "LOG_DIR": os.path.join(self.workdir, "logs"),
                                "KAFKA_HEAP_OPTS": "-Xmx128M"})
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return r.stdout


def produce(bootstrap: str, values: dict[int, list[bytes]]) -> dict[int, str | None]:
    """alice, a new producer (acks=all), sends values[p] to partition p: per partition the
    first delivery error's name, None when all were written."""
    import confluent_kafka as ck
    p = ck.Producer({**client(*ALICE, bootstrap), "acks": "all", "linger.ms": 5,
                     "message.timeout.ms": 8000})
    errors: dict[int, str | None] = dict.fromkeys(values)

    def delivered(err, msg, part):
        if err is not None and errors[part] is None:
            errors[part] = err.name()
    for part, vs in values.items():
        for v in vs:
            p.produce(TOPIC, value=v, partition=part,
                      on_delivery=lambda err, msg, part=part: delivered(err, msg, part))
    assert p.flush(15) == 0
    return errors


def consume(bootstrap: str, expected: int) -> list[bytes]:
    """alice reads the topic in GROUP from the start, commits, and leaves (bounded)."""
    import confluent_kafka as ck
    c = ck.Consumer({**client(*ALICE, bootstrap), "group.id": GROUP,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([TOPIC])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(got) < expected:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def login(bootstrap: str, user: str, password: str) -> str:
    """"ok" once a client of `user` reads metadata from `bootstrap`, else the name of the
    error it was told ("_AUTHENTICATION"), "" when neither came (bounded: 6 s)."""
    from confluent_kafka import Producer
    seen: list[str] = []
    p = Producer({**client(user, password, bootstrap),
                  "error_cb": lambda e: seen.append(e.name())})
    for _ in range(20):
        try:
            p.list_topics(timeout=0.2)
            return "ok"
        except Exception:  # KafkaException: no metadata (yet)
            p.poll(0.1)  # serves error_cb
            if "_AUTHENTICATION" in seen:
                return "_AUTHENTICATION"
    return seen[-1] if seen else ""


def leaders(bootstrap: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(client("admin", USERS["admin"], bootstrap))
    t = admin.list_topics(TOPIC, timeout=WAIT_S).topics[TOPIC]
    return {p: m.leader for p, m in t.partitions.items() if m.error is None}


def scenario(sasl: dict[int, str], tools: Tools) -> None:
    """The user's story on brokers 1-3 (id -> SASL_PLAINTEXT host:port)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    b1, b2, b3 = sasl[1], sasl[2], sasl[3]
    tools("kafka-configs.sh", b1, "--alter", "--add-config",
          f"SCRAM-SHA-256=[iterations=8192,password={ALICE[1]}]",
          "--entity-type", "users", "--entity-name", ALICE[0])
    admin = AdminClient(client("admin", USERS["admin"], b2))
    assignment = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]  # each broker leads one partition
    new = NewTopic(TOPIC, num_partitions=3, replica_assignment=assignment)
    for f in admin.create_topics([new], request_timeout=15).values():
        f.result(WAIT_S)
    want = {0: 1, 1: 2, 2: 3}
    assert eventually(lambda: leaders(b3), lambda got: got == want, timeout=WAIT_S) == want
    # alice logs in at broker 3 (her user was made at broker 1), but has no ACL
    assert eventually(lambda: login(b3, *ALICE), lambda r: r == "ok", timeout=WAIT_S) == "ok"
    assert produce(b3, {p: [b"no"] for p in range(3)}) == REFUSED_WRITE
    common = ("kafka-acls.sh", b2, "--add", "--allow-principal", f"User:{ALICE[0]}")
    tools(*common, "--operation", "Write", "--operation", "Read", "--operation", "Describe",
          "--topic", TOPIC)
    tools(*common, "--operation", "Read", "--group", GROUP)
    values = {p: [f"p{p}-{i}".encode() for i in range(N // 3)] for p in range(3)}
    assert eventually(lambda: produce(b3, values), lambda e: e == dict.fromkeys(range(3)),
                      timeout=WAIT_S) == dict.fromkeys(range(3))
    # every record once (an earlier refused attempt of the bounded wait wrote nothing)
    sent = collections.Counter(v for vs in values.values() for v in vs)
    got = collections.Counter(consume(b3, N))
    assert got == sent
    tools("kafka-acls.sh", b3, "--remove", "--force", "--allow-principal",
          f"User:{ALICE[0]}", "--operation", "Write", "--topic", TOPIC)
    # Describe and Read stay: the Produce reaches each leader, each refuses it
    assert eventually(lambda: produce(b3, {p: [b"late"] for p in range(3)}),
                      lambda e: e == REFUSED_WRITE, timeout=WAIT_S) == REFUSED_WRITE
    tools("kafka-configs.sh", b1, "--alter", "--delete-config", "SCRAM-SHA-256",
          "--entity-type", "users", "--entity-name", ALICE[0])
    refused = dict.fromkeys(sasl, "_AUTHENTICATION")
    assert eventually(lambda: {i: login(b, *ALICE) for i, b in sasl.items()},
                      lambda r: r == refused, timeout=WAIT_S) == refused
    assert {i: login(b, "admin", USERS["admin"]) for i, b in sasl.items()} == \
        dict.fromkeys(sasl, "ok")


@contextlib.contextmanager
def kafka_cluster(zookeeper: str) -> Iterator[dict[int, str]]:
    """Three Kafka 3.8 brokers in ZooKeeper mode: id -> SASL_PLAINTEXT host:port."""
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    chroot = f"/kafka-ref-{uuid.uuid4().hex}"
    bootstrap_users(zookeeper, chroot)
    procs = {i: ZkModeKafka(zookeeper + chroot, broker_id=i, settings=dict(SETTINGS))
             for i in (1, 2, 3)}
    try:
        for b in procs.values():
            b.settings["listeners"] = listeners(b)
            b.start()
        yield {i: f"127.0.0.1:{b.port + 1}" for i, b in procs.items()}
    finally:
        for b in procs.values():
            b.kill()
            b.cleanup()


def test_a_secured_kafkalite_cluster_serves_the_users_story(brokers, zk, zookeeper, connect,
                                                           tmp_path):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, start=False, **SETTINGS)))
    bootstrap_users(zookeeper, "/" + connect.split("/", 1)[1])
    for b in procs.values():
        b.settings["listeners"] = listeners(b)
        b.start()
    registered(zk(), {1, 2, 3})
    scenario({i: f"127.0.0.1:{b.port + 1}" for i, b in procs.items()}, Tools(str(tmp_path)))


def test_kafka_serves_the_same_story(zookeeper, tmp_path):
    tools = Tools(str(tmp_path))
    with kafka_cluster(zookeeper) as sasl:
        scenario(sasl, tools)
