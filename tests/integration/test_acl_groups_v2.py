"""Topic ACLs of the KIP-848 and KIP-932 group APIs, on a SASL_PLAINTEXT (PLAIN) listener with
StandardAuthorizer: `alice` authenticates there, the admin is User:ANONYMOUS on the
PLAINTEXT listener (a super user) and grants her ACLs. What is checked is Kafka 4.x's
KafkaApis and GroupMetadataManager (cited in each handler): Kafka 3.8 serves neither share
groups nor ConsumerGroupHeartbeat v1, so there is no reference run (COMPATIBILITY.md). Each
case shows the refusal without the ACL and the answer once alice has it."""
from __future__ import annotations

import datetime
import time
import uuid
from typing import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import free_port_pair
from tests.integration.sasl_targets import RawSasl
from tests.integration.test_groups_helpers import RawClient
from tests.integration.test_share_fetch import topic_id

pytestmark = pytest.mark.timeout(240)

TOPIC_AUTHORIZATION_FAILED = 29
UNDESCRIBABLE = "The group has described topic(s) that the client is not authorized to describe."
ZERO_UUID = uuid.UUID(int=0)
GROUP_RESOURCE, SET, ACCEPT = 32, 0, 1
_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
         'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(PLAINTEXT bootstrap for the admin, SASL_PLAINTEXT bootstrap for alice)."""
    plain, sasl = free_port_pair(), free_port_pair()
    while sasl in (plain, plain + 1):
        sasl = free_port_pair()
    bp = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("aclv2") / "data"), port=plain,
                       settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": _JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.share.heartbeat.interval.ms": "500",
        "group.share.record.lock.duration.ms": "2000",
        "group.share.min.record.lock.duration.ms": "1000"})
    try:
        bp.start()
        yield f"127.0.0.1:{plain}", f"127.0.0.1:{sasl}"
    finally:
        bp.cleanup()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def grant(broker, *acls: tuple) -> None:
    """ALLOW bindings for User:alice: (resource type, name, operation)."""
    admin = AdminClient({"bootstrap.servers": broker[0]})
    bindings = [AclBinding(rt, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for rt, name, op in acls]
    for fut in admin.create_acls(bindings, request_timeout=30).values():
        fut.result(timeout=30)


def topics(broker, *names: str, records: int = 0) -> None:
    admin = AdminClient({"bootstrap.servers": broker[0]})
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(15)
    if records:
        p = ck.Producer({"bootstrap.servers": broker[0], "linger.ms": 5})
        for n in names:
            for i in range(records):
                p.produce(n, value=b"%d" % i)
        assert p.flush(15) == 0


def alice_conf(broker) -> dict:
    return {"bootstrap.servers": broker[1], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}


def alice_raw(broker) -> RawClient:
    """kio requests on a connection alice logged in on (SASL PLAIN)."""
    sasl = RawSasl(broker[1])
    assert sasl.login_plain()[0] == 0
    c = RawClient.__new__(RawClient)
    c.sock, c.client_id, c.corr, c.pending = sasl.sock, b"alice", 100, []
    return c


def consumer_group_topics(broker, group: str) -> set[str]:
    """The topics of every member's current and target assignment, as the admin sees them."""
    c = RawClient(broker[0])
    try:
        (g,) = c.call(69, 1, group_ids=(group,), include_authorized_operations=False).groups
    finally:
        c.sock.close()
    return {tp.topic_name for m in g.members
            for a in (m.assignment, m.target_assignment) for tp in a.topic_partitions}


def poll(consumer, until, seconds: float) -> list:
    seen: list = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until(seen):
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            seen.append(m)
    return seen


# --- ConsumerGroupHeartbeat (68) with a regex, through confluent-kafka ---------------------

def test_regex_subscription_resolves_only_to_describable_topics(broker):
    """librdkafka's group.protocol=consumer sends the regex to the broker: the group's
    resolution leaves out the topic alice may not DESCRIBE (Kafka 4.x
    GroupMetadataManager.refreshRegularExpressions), so it is never assigned to her and
    she never reads it; a group resolving after she is granted it gets both."""
    prefix = _name("rx")
    seen_t, hidden_t = f"{prefix}-seen", f"{prefix}-hidden"
    topics(broker, seen_t, hidden_t, records=5)
    first, second = _name("rxg"), _name("rxg")
    grant(broker, (ResourceType.GROUP, first, AclOperation.READ),
          (ResourceType.GROUP, second, AclOperation.READ),
          (ResourceType.TOPIC, seen_t, AclOperation.READ))

    def consume(group: str, want: int) -> list:
        c = ck.Consumer({**alice_conf(broker), "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
        c.subscribe([f"^{prefix}-.*"])
        try:
            got = poll(c, lambda s: len(s) >= want, 45)
            got += poll(c, lambda s: False, 2)  # nothing else arrives
            return sorted({m.topic() for m in got}), len(got), consumer_group_topics(broker,
                                                                                     group)
        finally:
            c.close()

    assert consume(first, 5) == ([seen_t], 5, {seen_t})
    grant(broker, (ResourceType.TOPIC, hidden_t, AclOperation.READ))
    assert consume(second, 10) == (sorted([seen_t, hidden_t]), 10, {seen_t, hidden_t})


# --- ConsumerGroupDescribe (69), ShareGroupDescribe (77) ------------------------------------

def _join(admin: RawClient, api_key: int, group: str, topic: str):
    """The admin's member of a consumer (68) or share (76) group subscribed to `topic`."""
    if api_key == 68:
        return admin.call(68, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
                          instance_id=None, rack_id=None,
                          rebalance_timeout=datetime.timedelta(seconds=30),
                          subscribed_topic_names=(topic,), subscribed_topic_regex=None,
                          server_assignor=None, topic_partitions=())
    return admin.call(76, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
                      rack_id=None, subscribed_topic_names=(topic,))


@pytest.mark.parametrize("heartbeat, describe", [(68, 69), (76, 77)])
def test_group_describe_refuses_a_group_with_undescribable_topics(broker, heartbeat, describe):
    """The admin's member is assigned a topic alice may not DESCRIBE: the group is
    TOPIC_AUTHORIZATION_FAILED with Kafka's message and no members
    (KafkaApis.handleConsumerGroupDescribe / handleShareGroupDescribe), until she may
    describe the topic."""
    secret, group = _name("gd"), _name("gdg")
    topics(broker, secret)
    admin = RawClient(broker[0])
    alice = alice_raw(broker)
    try:
        r = _join(admin, heartbeat, group, secret)
        assert int(r.error_code) == 0 and r.assignment.topic_partitions
        grant(broker, (ResourceType.GROUP, group, AclOperation.DESCRIBE))

        def described():
            (g,) = alice.call(describe, 1, group_ids=(group,),
                              include_authorized_operations=False).groups
            return int(g.error_code), g.error_message, len(g.members)

        assert described() == (TOPIC_AUTHORIZATION_FAILED, UNDESCRIBABLE, 0)
        grant(broker, (ResourceType.TOPIC, secret, AclOperation.DESCRIBE))
        assert described() == (0, None, 1)
    finally:
        admin.sock.close()
        alice.sock.close()


# --- ShareFetch (78) / ShareAcknowledge (79), through confluent-kafka and raw -----------------

def share_earliest(broker, group: str) -> None:
    c = RawClient(broker[0])
    m = c.schema(44, 1)
    (r,) = c.call(44, 1, validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configs=(m.AlterableConfig(
            name="share.auto.offset.reset", config_operation=SET, value="earliest"),)),)
    ).responses
    c.sock.close()
    assert int(r.error_code) == 0, r.error_message


def test_share_consumer_reads_only_topics_it_may_read(broker):
    """DESCRIBE lets alice subscribe to both topics (ShareGroupHeartbeat), but ShareFetch
    needs READ on each (KafkaApis.handleShareFetchRequest): the topic she may only describe
    delivers nothing until she is granted READ, then its records come."""
    readable, described, group = _name("sr"), _name("sd"), _name("sg")
    topics(broker, readable, described, records=5)
    share_earliest(broker, group)
    grant(broker, (ResourceType.GROUP, group, AclOperation.READ),
          (ResourceType.TOPIC, readable, AclOperation.READ),
          (ResourceType.TOPIC, described, AclOperation.DESCRIBE))
    c = ck.ShareConsumer({**alice_conf(broker), "group.id": group,
                          "share.acknowledgement.mode": "implicit"})
    c.subscribe([readable, described])

    errors: list[int] = []

    def share_poll(until, seconds: float) -> list:
        seen: list = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until(seen):
            try:
                seen += [m for m in c.poll(0.2) if m.error() is None]
            except ck.KafkaException as e:  # librdkafka raises the partition's error
                errors.append(e.args[0].code())
        return seen

    try:
        got = share_poll(lambda s: len(s) >= 5, 45)
        got += share_poll(lambda s: False, 3)
        assert sorted((m.topic(), m.offset()) for m in got) == [(readable, i) for i in range(5)]
        assert set(errors) == {ck.KafkaError.TOPIC_AUTHORIZATION_FAILED}
        grant(broker, (ResourceType.TOPIC, described, AclOperation.READ))
        got = share_poll(lambda s: len(s) >= 5, 45)
        assert sorted((m.topic(), m.offset()) for m in got) == [(described, i)
                                                                for i in range(5)]
    finally:
        c.close()


def test_share_fetch_and_acknowledge_refuse_each_topic_without_read(broker):
    """Raw ShareFetch and ShareAcknowledge: the partitions of a topic alice may not READ
    answer TOPIC_AUTHORIZATION_FAILED and deliver no records; an acknowledgement on it is
    TOPIC_AUTHORIZATION_FAILED too and leaves its records as they were."""
    refused, group = _name("sfr"), _name("sfg")
    topics(broker, refused, records=3)
    share_earliest(broker, group)
    grant(broker, (ResourceType.GROUP, group, AclOperation.READ))
    alice = alice_raw(broker)
    member = uuid.uuid4().hex
    m = alice.schema(78, 1)
    try:
        tid = topic_id(RawClient(broker[0]), refused)

        def fetch(epoch: int, acks=()):
            r = alice.call(78, 1, group_id=group, member_id=member, share_session_epoch=epoch,
                           max_wait=datetime.timedelta(milliseconds=300), min_bytes=1,
                           max_bytes=1 << 20, max_records=500, batch_size=500,
                           topics=(m.FetchTopic(topic_id=tid, partitions=(m.FetchPartition(
                               partition_index=0, acknowledgement_batches=tuple(
                                   m.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                          acknowledge_types=(ACCEPT,))
                                   for f, last in acks)),)),),
                           forgotten_topics_data=())
            (p,) = [p for t in r.responses for p in t.partitions]
            return (int(r.error_code), int(p.error_code), int(p.acknowledge_error_code),
                    len(p.acquired_records))

        assert fetch(0) == (0, TOPIC_AUTHORIZATION_FAILED, 0, 0)
        assert fetch(1, [(0, 2)]) == (0, TOPIC_AUTHORIZATION_FAILED,
                                      TOPIC_AUTHORIZATION_FAILED, 0)
        a = alice.schema(79, 1)
        r = alice.call(79, 1, group_id=group, member_id=member, share_session_epoch=2,
                       topics=(a.AcknowledgeTopic(topic_id=tid, partitions=(
                           a.AcknowledgePartition(partition_index=0, acknowledgement_batches=(
                               a.AcknowledgementBatch(first_offset=0, last_offset=2,
                                                      acknowledge_types=(ACCEPT,)),)),)),))
        assert [int(p.error_code) for t in r.responses for p in t.partitions] == [
            TOPIC_AUTHORIZATION_FAILED]
        grant(broker, (ResourceType.TOPIC, refused, AclOperation.READ))
        assert fetch(3) == (0, 0, 0, 1)  # the three records, never acknowledged: available
    finally:
        alice.sock.close()


# --- Describe/Alter/DeleteShareGroupOffsets (90/91/92), ShareGroupDescribe (77) -------------

def test_share_offsets_apis_check_each_topic(broker):
    """DESCRIBE on each topic for DescribeShareGroupOffsets (named: refused last, zero id;
    all: left out), READ for Alter/DeleteShareGroupOffsets (refused first, unchanged), as
    Kafka 4.x KafkaApis."""
    mine, theirs, group = _name("so"), _name("st"), _name("sog")
    topics(broker, mine, theirs, records=4)
    admin = RawClient(broker[0])
    alice = alice_raw(broker)
    m91, m90, m92 = admin.schema(91, 0), admin.schema(90, 1), admin.schema(92, 0)

    def alter(c, *names: str):
        r = c.call(91, 0, group_id=group, topics=tuple(m91.AlterShareGroupOffsetsRequestTopic(
            topic_name=n, partitions=(m91.AlterShareGroupOffsetsRequestPartition(
                partition_index=0, start_offset=2),)) for n in names))
        return [(t.topic_name, [(int(p.error_code), p.error_message) for p in t.partitions])
                for t in r.responses]

    def offsets(c, names):
        (g,) = c.call(90, 1, groups=(m90.DescribeShareGroupOffsetsRequestGroup(
            group_id=group, topics=None if names is None else tuple(
                m90.DescribeShareGroupOffsetsRequestTopic(topic_name=n, partitions=(0,))
                for n in names)),)).groups
        return [(t.topic_name, t.topic_id in (None, ZERO_UUID),  # kio reads zero as None
                 [(p.start_offset, int(p.error_code), p.error_message) for p in t.partitions])
                for t in g.topics]

    try:
        ok = [(0, None)]
        assert alter(admin, mine) == [(mine, ok)]  # creates the group, offsets at 2
        grant(broker, (ResourceType.GROUP, group, AclOperation.READ),
              (ResourceType.GROUP, group, AclOperation.DELETE),
              (ResourceType.TOPIC, mine, AclOperation.READ))
        refused = [(TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")]
        assert alter(alice, mine, theirs) == [(theirs, refused), (mine, ok)]
        assert offsets(admin, None) == [(mine, False, [(2, 0, None)])]  # theirs untouched
        assert alter(admin, theirs) == [(theirs, ok)]

        assert offsets(alice, [theirs, mine]) == [
            (mine, False, [(2, 0, None)]),
            (theirs, True, [(-1, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")])]
        assert offsets(alice, None) == [(mine, False, [(2, 0, None)])]

        r = alice.call(92, 0, group_id=group, topics=tuple(
            m92.DeleteShareGroupOffsetsRequestTopic(topic_name=n) for n in (mine, theirs)))
        assert [(t.topic_name, int(t.error_code)) for t in r.responses] == [
            (theirs, TOPIC_AUTHORIZATION_FAILED), (mine, 0)]
        assert offsets(admin, None) == [(theirs, False, [(2, 0, None)])]

        grant(broker, (ResourceType.TOPIC, theirs, AclOperation.READ))
        assert offsets(alice, [theirs]) == [(theirs, False, [(2, 0, None)])]
    finally:
        admin.sock.close()
        alice.sock.close()
