"""Security end to end (issue 15): TLS, SASL/SCRAM and ACLs together, against kafkalite and a
private Apache Kafka 3.8 configured alike. One SASL_SSL listener (certificates from
tests/helpers/certs.py) with PLAIN for the admin (a JAAS user) and SCRAM-SHA-512 for alice and
bob, whom the admin creates with AlterUserScramCredentials; StandardAuthorizer with
super.users=User:admin (and User:ANONYMOUS on Kafka, for its controller's PLAINTEXT listener, as
test_acl_enforcement.py explains). Every client is confluent-kafka over SASL_SSL; the expected
answers are the ones Kafka 3.8 gives, and kafkalite must give the same. Kafka applies ACL and
SCRAM changes asynchronously: probes are retried, bounded."""
from __future__ import annotations

import uuid
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from kafkalite.testing import BrokerProcess
from tests.helpers.certs import make_pki
from tests.helpers.real_kafka import RealKafka, eventually, free_port_pair, unavailable_reason

pytestmark = pytest.mark.timeout(300)

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
_L = "listener.name.sasl_ssl."


def security_settings(pki, plain: int, sasl: int, kafka: bool) -> dict[str, str]:
    """One set of Kafka properties for both brokers (Kafka adds its controller listener)."""
    served = {"PLAINTEXT": plain, "SASL_SSL": sasl}
    own = {**served, "CONTROLLER": plain + 1} if kafka else served
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in own.items()),
        "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in served.items()),
        "listener.security.protocol.map": ",".join(
            f"{name}:{'PLAINTEXT' if name == 'CONTROLLER' else name}" for name in own),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        _L + "plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-secret" user_admin="admin-secret";',
        _L + "scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin" + (";User:ANONYMOUS" if kafka else ""),
    }


class Secured:
    def __init__(self, kind: str, bootstrap: str, ca: str):
        self.kind, self.bootstrap, self.ca = kind, bootstrap, ca

    def conf(self, user: str, password: str | None = None, **over: object) -> dict:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
                "ssl.ca.location": self.ca,
                "sasl.mechanism": "PLAIN" if user == "admin" else "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password or PASSWORDS[user], **over}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.conf(user))

    def acl(self, *bindings: tuple) -> None:
        """(principal user, resource type, name, pattern, operation, permission[, host])."""
        made = [AclBinding(rt, name, pt, f"User:{who}", host[0] if host else "*", op, perm)
                for who, rt, name, pt, op, perm, *host in bindings]
        admin = self.admin()  # held: a collected client cancels its futures
        for fut in admin.create_acls(made, request_timeout=30).values():
            fut.result(timeout=30)

    def topics_for(self, user: str, prefix: str) -> set[str]:
        """The topics of this run that an all-topics Metadata shows the user."""
        names = self.admin(user).list_topics(timeout=15).topics
        return {n for n in names if n.startswith(prefix)}


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def broker(request, tmp_path_factory) -> Iterator[Secured]:
    pki = make_pki(str(tmp_path_factory.mktemp("pki")))
    plain, sasl = free_port_pair(), free_port_pair()
    while sasl in (plain, plain + 1):
        sasl = free_port_pair()
    kafka = request.param == "kafka"
    settings = security_settings(pki, plain, sasl, kafka)
    if kafka:
        if unavailable_reason():
            pytest.skip(unavailable_reason())
        proc: BrokerProcess = RealKafka(port=plain, settings=settings)
    else:
        proc = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("kl") / "data"), port=plain,
                             settings=settings)
    try:
        proc.start()
        target = Secured(request.param, f"127.0.0.1:{sasl}", pki.ca)
        _scram_users(target)
        yield target
    finally:
        proc.cleanup()


def _scram_users(target: Secured) -> None:
    """The admin creates alice and bob (SCRAM-SHA-512, 4096 iterations); waits until both can
    log in."""
    admin = target.admin()
    for user in ("alice", "bob"):
        up = UserScramCredentialUpsertion(user, ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 4096), PASSWORDS[user].encode())
        for fut in admin.alter_user_scram_credentials([up]).values():
            fut.result(timeout=30)
    for user in ("alice", "bob"):
        assert eventually(lambda: _logs_in(target, user), bool, timeout=30), user


def _logs_in(target: Secured, user: str, password: str | None = None) -> bool:
    try:
        AdminClient(target.conf(user, password, log_level=0)).list_topics(timeout=3)
        return True
    except Exception:
        return False


def _create(target: Secured, *names: str) -> None:
    admin = target.admin()
    for fut in admin.create_topics([NewTopic(n, 1, 1) for n in names],
                                   request_timeout=30).values():
        fut.result(timeout=30)
    eventually(lambda: set(names) <= set(target.admin().list_topics(timeout=10).topics),
               bool)


def _produce(target: Secured, user: str, topic: str, values: list[bytes]):
    """None when every record is delivered, else the first delivery error."""
    errors: list = []
    p = Producer(target.conf(user, **{"message.timeout.ms": 10000, "retries": 0}))
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(20)
    failed = [e for e in errors if e is not None]
    return failed[0] if failed else (None if len(errors) == len(values) else "undelivered")


def _consume(target: Secured, user: str, topic: str, group: str, want: int):
    """(values read, first error) of a group consumer reading from the start, bounded."""
    c = Consumer(target.conf(user, **{"group.id": group, "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False}))
    values: list[bytes] = []
    try:
        c.subscribe([topic])
        for _ in range(60):
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return values, msg.error()
            values.append(msg.value())
            if len(values) >= want:
                c.commit(asynchronous=False)
                break
        return values, None
    finally:
        c.close()


def _code(err) -> int | None:
    return err.code() if isinstance(err, KafkaError) else err


def test_alice_writes_through_a_prefixed_acl_and_bob_reads_with_a_group(broker):
    run = "sec-" + uuid.uuid4().hex[:8]
    topic, group = f"{run}-orders-eu", f"{run}-billing"
    _create(broker, topic)
    refused = _produce(broker, "alice", topic, [b"early"])
    assert _code(refused) == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    broker.acl(("alice", ResourceType.TOPIC, f"{run}-orders", ResourcePatternType.PREFIXED,
                AclOperation.WRITE, AclPermissionType.ALLOW))
    records = [f"order-{i}".encode() for i in range(5)]
    assert eventually(lambda: _produce(broker, "alice", topic, records), lambda e: e is None,
                      timeout=30) is None
    broker.acl(("bob", ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                AclOperation.READ, AclPermissionType.ALLOW),
               ("bob", ResourceType.GROUP, group, ResourcePatternType.LITERAL,
                AclOperation.READ, AclPermissionType.ALLOW))
    values, err = eventually(lambda: _consume(broker, "bob", topic, group, len(records)),
                             lambda r: r[1] is None and len(r[0]) >= len(records), timeout=30)
    assert err is None and values[:len(records)] == records
    admin = broker.admin()
    committed = admin.list_consumer_group_offsets([_group_request(group)])[group].result(
        timeout=30)
    assert [tp.offset for tp in committed.topic_partitions] == [len(records)]
    # READ is not WRITE: bob is refused produce.
    assert _code(_produce(broker, "bob", topic, [b"x"])) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A DENY for bob's host wins over his ALLOW.
    broker.acl(("bob", ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                AclOperation.READ, AclPermissionType.DENY, "127.0.0.1"))
    _, err = eventually(lambda: _consume(broker, "bob", topic, group, 1),
                        lambda r: r[1] is not None, timeout=30)
    assert _code(err) == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def _group_request(group: str):
    from confluent_kafka import ConsumerGroupTopicPartitions
    return ConsumerGroupTopicPartitions(group)


def test_metadata_lists_only_what_each_may_describe(broker):
    run = "meta-" + uuid.uuid4().hex[:8]
    shared, alices, secret = f"{run}-shared", f"{run}-alice-log", f"{run}-secret"
    _create(broker, shared, alices, secret)
    broker.acl(("alice", ResourceType.TOPIC, f"{run}-alice", ResourcePatternType.PREFIXED,
                AclOperation.DESCRIBE, AclPermissionType.ALLOW),
               ("alice", ResourceType.TOPIC, shared, ResourcePatternType.LITERAL,
                AclOperation.WRITE, AclPermissionType.ALLOW),
               ("bob", ResourceType.TOPIC, shared, ResourcePatternType.LITERAL,
                AclOperation.READ, AclPermissionType.ALLOW))
    want = {"alice": {shared, alices}, "bob": {shared}, "admin": {shared, alices, secret}}
    seen = {u: eventually(lambda: broker.topics_for(u, run), lambda s: s == want[u],
                          timeout=30) for u in want}
    assert seen == want


def test_wrong_password_is_refused_and_the_broker_keeps_serving(broker):
    errors: list = []
    p = Producer(broker.conf("alice", "not-her-password", error_cb=errors.append))
    for _ in range(40):  # bounded: librdkafka reports the failed login through poll()
        p.poll(0.25)
        if errors:
            break
    del p
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors}, errors
    assert not _logs_in(broker, "bob", "alice-secret")
    assert _logs_in(broker, "alice") and _logs_in(broker, "bob")
