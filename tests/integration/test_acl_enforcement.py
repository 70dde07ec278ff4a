"""ACL enforcement (issue 15) against kafkalite and a private Apache Kafka 3.8 configured alike:
an SSL listener with ssl.client.auth=required (certificates from tests/helpers/certs.py),
StandardAuthorizer, super.users = the admin certificate's DN (and User:ANONYMOUS, which Kafka's
own controller connection over PLAINTEXT needs). The admin creates ACLs through confluent-kafka's
AdminClient over mutual TLS for `alice`, a second client certificate; alice's clients (and raw
requests over TLS) then get the same answers from both brokers: the expectations below are the
ones Kafka 3.8 gives. Kafka applies new ACLs asynchronously: probes are retried, bounded."""
from __future__ import annotations

import socket
import ssl
import uuid
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)
from kafka.protocol.admin import (AlterClientQuotasRequest, AlterConfigsRequest,
                                  AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest,
                                  AlterUserScramCredentialsRequest, CreatePartitionsRequest,
                                  CreateTopicsRequest, DescribeClientQuotasRequest,
                                  DescribeLogDirsRequest, DescribeQuorumRequest,
                                  DescribeUserScramCredentialsRequest, ElectLeadersRequest,
                                  ListPartitionReassignmentsRequest,
                                  DeleteRecordsRequest, DeleteTopicsRequest,
                                  DescribeClusterRequest, DescribeConfigsRequest,
                                  DescribeProducersRequest, DescribeTopicPartitionsRequest,
                                  DescribeTransactionsRequest,
                                  IncrementalAlterConfigsRequest, ListTransactionsRequest)
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest

from kafkalite.testing import BrokerProcess
from tests.helpers.certs import CLIENT_DN, make_pki, sign
from tests.helpers.kbatch import call, connect
from tests.helpers.real_kafka import (RealKafka, create_topic, eventually, free_port_pair,
                                      unavailable_reason)

pytestmark = pytest.mark.timeout(300)

ALICE = "User:CN=alice"
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_REQUEST = 42
DUPLICATE_MESSAGE = "Duplicate topic name."


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(str(tmp_path_factory.mktemp("pki")))
    pki.alice_key, pki.alice_cert = sign(pki.dir, "alice", "/CN=alice")
    return pki


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def broker(request, pki, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(plaintext bootstrap, mutual-TLS bootstrap) of a broker with the authorizer on."""
    plain, tls = free_port_pair(), free_port_pair()
    extra_map = "CONTROLLER:PLAINTEXT," if request.param == "kafka" else ""
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}"
                     + (f",CONTROLLER://127.0.0.1:{plain + 1}" if extra_map else ""),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "listener.security.protocol.map": f"{extra_map}PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:ANONYMOUS;User:{CLIENT_DN}",
    }
    if request.param == "kafkalite":
        proc = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("kl") / "data"), port=plain,
                             settings=settings)
    else:
        if unavailable_reason():
            pytest.skip(unavailable_reason())
        # Its server.properties reads a backslash as an escape: the DN's "\," needs two
        # (kafkalite's --set takes the value as it is).
        settings["super.users"] = settings["super.users"].replace("\\", "\\\\")
        proc = RealKafka(port=plain, settings=settings)
    try:
        proc.start()
        yield f"127.0.0.1:{plain}", f"127.0.0.1:{tls}"
    finally:
        proc.cleanup()


def _tls_conf(pki, who: str) -> dict:
    key, cert = ((pki.alice_key, pki.alice_cert) if who == "alice"
                 else (pki.client_key, pki.client_cert))
    return {"security.protocol": "SSL", "ssl.ca.location": pki.ca,
            "ssl.certificate.location": cert, "ssl.key.location": key}


def allow(broker, pki, *acls: tuple) -> None:
    """The admin (a super user by its certificate) creates ALLOW/DENY bindings for alice:
    (resource type, name, pattern type, operation[, permission])."""
    admin = AdminClient({"bootstrap.servers": broker[1], **_tls_conf(pki, "admin")})
    bindings = [AclBinding(rt, name, pt, ALICE, "*", op, perm[0] if perm else
                           AclPermissionType.ALLOW) for rt, name, pt, op, *perm in acls]
    for fut in admin.create_acls(bindings, request_timeout=30).values():
        fut.result(timeout=30)


def alice_socket(broker, pki) -> socket.socket:
    ctx = ssl.create_default_context(cafile=pki.ca)
    ctx.load_cert_chain(pki.alice_cert, pki.alice_key)
    host, port = broker[1].rsplit(":", 1)
    s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10),
                        server_hostname=host)
    s.settimeout(10)
    return s


def metadata(broker, pki, names: list[str] | None, version: int = 10):
    Req = MetadataRequest[version]
    with alice_socket(broker, pki) as s:
        return call(s, Req(topics=None if names is None else
                           [Req.MetadataRequestTopic(name=n) for n in names],
                           allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=True,
                           include_topic_authorized_operations=True))


def _topic(prefix: str = "acl") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_produce_needs_write_on_the_topic(broker, pki):
    topic = _topic()
    create_topic(broker[0], topic)
    allow(broker, pki, (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                        AclOperation.DESCRIBE))
    eventually(lambda: metadata(broker, pki, [topic]).topics[0].error_code, lambda e: e == 0)

    def send() -> KafkaError | None:
        errors: list = []
        p = Producer({"bootstrap.servers": broker[1], **_tls_conf(pki, "alice"),
                      "message.timeout.ms": 15000, "retries": 0})
        p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
        p.flush(20)
        return errors[0] if errors else "no delivery report"

    refused = send()
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, pki, (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                        AclOperation.WRITE))
    assert eventually(send, lambda err: err is None, timeout=20) is None


def test_consumer_without_read_on_the_group(broker, pki):
    topic, group = _topic(), _topic("grp")
    create_topic(broker[0], topic)
    allow(broker, pki, (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                        AclOperation.READ))
    errors: list = []
    c = Consumer({"bootstrap.servers": broker[1], **_tls_conf(pki, "alice"),
                  "group.id": group, "auto.offset.reset": "earliest",
                  "error_cb": errors.append})
    try:
        c.subscribe([topic])
        with pytest.raises(KafkaException) as raised:
            for _ in range(40):  # bounded: librdkafka reports it from its coordinator query
                msg = c.poll(0.5)
                if msg is not None and msg.error():
                    errors.append(msg.error())
                if errors:
                    raise KafkaException(errors[0])
        assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()


def test_metadata_hides_topics_alice_may_not_describe(broker, pki):
    """PREFIXED ALLOW on `pfx-*`, a LITERAL DENY on one of them: DENY wins; topics without
    DESCRIBE are left out of all-topics Metadata and refused when named, existing or not."""
    pfx = _topic("pfx") + "-"
    seen, denied, other = pfx + "seen", pfx + "secret", _topic("other")
    for t in (seen, denied, other):
        create_topic(broker[0], t)
    allow(broker, pki,
          (ResourceType.TOPIC, pfx, ResourcePatternType.PREFIXED, AclOperation.READ),
          (ResourceType.TOPIC, denied, ResourcePatternType.LITERAL, AclOperation.DESCRIBE,
           AclPermissionType.DENY))
    everything = eventually(lambda: metadata(broker, pki, None),
                            lambda r: seen in {t.name for t in r.topics})
    names = {t.name for t in everything.topics}
    assert seen in names and denied not in names and other not in names
    missing = _topic("never")
    named = metadata(broker, pki, [seen, denied, other, missing, pfx + "never-created"])
    answers = {t.name: (t.error_code, len(t.partitions)) for t in named.topics}
    assert answers == {seen: (0, 1), denied: (TOPIC_AUTHORIZATION_FAILED, 0),
                       other: (TOPIC_AUTHORIZATION_FAILED, 0),
                       missing: (TOPIC_AUTHORIZATION_FAILED, 0),
                       pfx + "never-created": (3, 0)}  # UNKNOWN_TOPIC_OR_PARTITION
    # READ implies DESCRIBE; nothing else on the topic; no ACL on the cluster: 0.
    ops = {t.name: t.authorized_operations for t in named.topics}
    assert ops[seen] == {READ, DESCRIBE} and ops[denied] is None
    assert named.authorized_operations == set()


def test_transactional_producer_without_write_on_its_id(broker, pki):
    topic = _topic()
    create_topic(broker[0], topic)
    allow(broker, pki, (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                        AclOperation.WRITE),
          (ResourceType.TRANSACTIONAL_ID, "txn-", ResourcePatternType.PREFIXED,
           AclOperation.DESCRIBE))
    p = Producer({"bootstrap.servers": broker[1], **_tls_conf(pki, "alice"),
                  "transactional.id": "txn-" + uuid.uuid4().hex[:8]})
    with pytest.raises(KafkaException) as raised:
        p.init_transactions(30)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# --- cluster operations (before test_cluster_authorized_operations grants alice ALTER) ---

def _cluster_requests(topic: str) -> dict:
    """One request per cluster-level admin API, and how to read (code, message) pairs from
    its answer."""
    P, L, Q, E = (AlterPartitionReassignmentsRequest[0], ListPartitionReassignmentsRequest[0],
                  DescribeQuorumRequest[1], ElectLeadersRequest[2])
    A, D, DU, AU = (AlterClientQuotasRequest[1], DescribeClientQuotasRequest[1],
                    DescribeUserScramCredentialsRequest[0], AlterUserScramCredentialsRequest[0])
    DL, AR = DescribeLogDirsRequest[4], AlterReplicaLogDirsRequest[2]
    return {
        "AlterPartitionReassignments": (P(timeout_ms=10000, topics=[P.ReassignableTopic(
            name=topic, partitions=[P.ReassignableTopic.ReassignablePartition(
                partition_index=0, replicas=None)])]), lambda r: [(r.error_code, r.error_message)]
            + [(p.error_code, p.error_message) for t in r.responses for p in t.partitions]),
        "ListPartitionReassignments": (L(timeout_ms=10000, topics=None),
                                       lambda r: [(r.error_code, r.error_message)]),
        "DescribeQuorum": (Q(topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[
            Q.TopicData.PartitionData(partition_index=0)])]), lambda r: [(r.error_code, None)]),
        "ElectLeaders": (E(election_type=0, topic_partitions=[E.TopicPartitions(
            topic=topic, partitions=[0])], timeout_ms=10000), lambda r: [(r.error_code, None)]
            + [(p.error_code, p.error_message) for t in r.replica_election_results
               for p in t.partition_result]),
        "AlterClientQuotas": (A(entries=[A.EntryData(entity=[A.EntryData.EntityData(
            entity_type="user", entity_name="bob")], ops=[A.EntryData.OpData(
                key="producer_byte_rate", value=1000.0, remove=False)])], validate_only=True),
            lambda r: [(e.error_code, e.error_message) for e in r.entries]),
        "DescribeClientQuotas": (D(components=[], strict=False),
                                 lambda r: [(r.error_code, r.error_message, r.entries)]),
        "DescribeUserScramCredentials": (DU(users=None), lambda r: [
            (r.error_code, r.error_message, len(r.results))]),
        "AlterUserScramCredentials": (AU(deletions=[AU.ScramCredentialDeletion(
            name="zed", mechanism=1)], upsertions=[AU.ScramCredentialUpsertion(
                name="amy", mechanism=1, iterations=8192, salt=b"s" * 16,
                salted_password=b"p" * 32)]),
            lambda r: [(u.user, u.error_code, u.error_message) for u in r.results]),
        "DescribeLogDirs": (DL(topics=None), lambda r: [(r.error_code, len(r.results))]),
        "AlterReplicaLogDirs": (AR(dirs=[AR.AlterReplicaLogDir(path="/nowhere", topics=[
            AR.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=topic, partitions=[0])])]),
            lambda r: [(p.error_code,) for t in r.results for p in t.partitions]),
    }


def test_cluster_admin_apis_refused(broker, pki, request):
    """Without ACLs on the cluster every cluster-level admin API is refused with
    CLUSTER_AUTHORIZATION_FAILED, in each API's own error shape. Kafka's thrown refusals read
    "Request <its connection's details> is not authorized."; kafkalite names the principal."""
    topic = _topic("clu")
    create_topic(broker[0], topic)
    on_kafka = request.node.callspec.params["broker"] == "kafka"
    denied, thrown, plain = CLUSTER_AUTHORIZATION_FAILED, "thrown", "Cluster authorization failed."
    want = {
        "AlterPartitionReassignments": [(denied, thrown), (denied, thrown)],
        "ListPartitionReassignments": [(denied, thrown)],
        "DescribeQuorum": [(denied, None)],
        "ElectLeaders": [(denied, None), (denied, thrown)],
        "AlterClientQuotas": [(denied, plain)],
        "DescribeClientQuotas": [(denied, None, None)],
        "DescribeUserScramCredentials": [(denied, plain, 0)],
        "AlterUserScramCredentials": [("amy", denied, thrown), ("zed", denied, thrown)],
        "DescribeLogDirs": [(denied, 0)],
        "AlterReplicaLogDirs": [(denied,)],
    }
    if on_kafka:  # Kafka 3.8 never answers it to a principal without DESCRIBE on the cluster
        del want["DescribeUserScramCredentials"]

    def thrown_as_one(v):
        return thrown if isinstance(v, str) and v.startswith("Request ") and \
            v.endswith(" is not authorized.") else v

    got = {name: [tuple(thrown_as_one(v) for v in row)
                  for row in read(alice_call(broker, pki, req))]
           for name, (req, read) in _cluster_requests(topic).items() if name in want}
    assert got == want


def test_write_txn_markers_needs_cluster_action(broker, pki):
    from tests.integration.test_txn_coordinator_wire import Wire
    topic = _topic("wtm")
    create_topic(broker[0], topic)
    w = Wire.__new__(Wire)  # its raw requests, over alice's TLS connection
    w.sock, w.corr = alice_socket(broker, pki), 0
    try:
        m = w.mod(27, 1)
        r = w.call(27, 1, markers=(m.WritableTxnMarker(
            producer_id=1000, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=(m.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),)),))
    finally:
        w.close()
    assert [(x.producer_id, t.name, p.partition_index, p.error_code) for x in r.markers
            for t in x.topics for p in t.partitions] == [(1000, topic, 0, CLUSTER_REFUSED_CODE)]


def test_cluster_authorized_operations(broker, pki):
    """Metadata v10 and DescribeCluster answer the operations alice's ACLs allow on the cluster
    (0 without DESCRIBE there), and ALTER implies DESCRIBE."""
    def describe_cluster():
        with alice_socket(broker, pki) as s:
            return call(s, DescribeClusterRequest[0](
                include_cluster_authorized_operations=True)).authorized_operations

    allow(broker, pki, (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                        AclOperation.ALTER))
    want = {ALTER, DESCRIBE}
    assert eventually(describe_cluster, lambda ops: ops == want) == want
    assert metadata(broker, pki, []).authorized_operations == want


# --- topic administration (CreateTopics, CreatePartitions, DeleteRecords, DeleteTopics) ---

ZERO_ID = uuid.UUID(int=0)
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
UNKNOWN_TOPIC_OR_PARTITION = 3


def alice_call(broker, pki, req):
    with alice_socket(broker, pki) as s:
        return call(s, req)


def _literal(name: str, op, rtype=ResourceType.TOPIC, *perm) -> tuple:
    return (rtype, name, ResourcePatternType.LITERAL, op, *perm)


def test_create_topics_needs_create_and_hides_configs_without_describe_configs(broker, pki):
    """No CREATE: TOPIC_AUTHORIZATION_FAILED "Authorization failed."; CREATE alone creates the
    topic but its answer hides partitions, replication factor and configs
    (topic_config_error_code TOPIC_AUTHORIZATION_FAILED); with DESCRIBE_CONFIGS they show."""
    refused, blind, seeing = _topic("ct-no"), _topic("ct-blind"), _topic("ct-see")
    allow(broker, pki, _literal(blind, AclOperation.CREATE), _literal(seeing, AclOperation.CREATE),
          _literal(seeing, DESCRIBE_CONFIGS))
    Req = CreateTopicsRequest[7]

    def create(validate_only: bool) -> dict:
        resp = alice_call(broker, pki, Req(topics=[
            Req.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
            for n in (refused, blind, seeing)], timeout_ms=20000, validate_only=validate_only))
        return {t.name: (t.error_code, t.error_message, t.num_partitions, t.replication_factor,
                         t.topic_config_error_code, len(t.configs) > 0) for t in resp.topics}

    want = {refused: (TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", -1, -1, 0, False),
            blind: (0, None, -1, -1, TOPIC_AUTHORIZATION_FAILED, False),
            seeing: (0, None, 1, 1, 0, True)}
    eventually(lambda: create(True), lambda got: got == want)  # Kafka's ACLs land later
    assert create(False) == want

    def listed() -> set[str]:  # the admin sees what was created
        with connect(broker[0]) as s:
            return {t.name for t in call(s, MetadataRequest[1](topics=None)).topics}
    # Kafka's CreateTopics answers once its controller has the topics, its broker's Metadata
    # cache a moment later (a loaded CI machine saw it without them)
    names = eventually(listed, lambda names: blind in names and seeing in names)
    assert refused not in names


def _needs(broker, pki, prefix: str, operation, ask, refusal, granted) -> None:
    """An existing and a missing topic refused alike, then the existing one answered once
    alice has `operation` on it; ask(names) -> {name: answer}."""
    topic, missing = _topic(prefix), _topic(prefix + "-missing")
    create_topic(broker[0], topic)
    allow(broker, pki, _literal(topic, AclOperation.DESCRIBE))
    assert ask([topic, missing]) == {topic: refusal, missing: refusal}
    allow(broker, pki, _literal(topic, operation))
    assert eventually(lambda: ask([topic]), lambda got: got[topic] == granted) == \
        {topic: granted}


def test_create_partitions_needs_alter_on_the_topic(broker, pki):
    Req = CreatePartitionsRequest[3]

    def grow(names) -> dict:
        resp = alice_call(broker, pki, Req(topics=[Req.CreatePartitionsTopic(
            name=n, count=2, assignments=None) for n in names], timeout_ms=20000,
            validate_only=False))
        return {r.name: (r.error_code, r.error_message) for r in resp.results}

    _needs(broker, pki, "cp", AclOperation.ALTER, grow, (TOPIC_AUTHORIZATION_FAILED, None),
           (0, None))


def test_create_partitions_duplicates_before_authorization(broker, pki):
    """A topic named twice is INVALID_REQUEST "Duplicate topic name." whether or not alice may
    ALTER it, answered first and left out of the authorization; then the topics refused
    ALTER, then the others, as Kafka 3.8's ControllerApis answers. The duplicates come in
    Kafka's hash-set order (kafkalite: first mention), so they are compared as a set."""
    dup_ok, dup_no, refused, grown = (_topic("cpd-ok"), _topic("cpd-no"), _topic("cpd-ref"),
                                      _topic("cpd-grow"))
    for t in (dup_ok, dup_no, refused, grown):
        create_topic(broker[0], t)
    allow(broker, pki, *(_literal(t, AclOperation.DESCRIBE) for t in (dup_ok, dup_no, refused,
                                                                       grown)),
          _literal(dup_ok, AclOperation.ALTER), _literal(grown, AclOperation.ALTER))
    Req = CreatePartitionsRequest[3]

    def grow(validate_only: bool) -> list:
        resp = alice_call(broker, pki, Req(topics=[Req.CreatePartitionsTopic(
            name=n, count=2, assignments=None) for n in (dup_ok, grown, dup_no, refused, dup_ok,
                                                         dup_no)],
            timeout_ms=20000, validate_only=validate_only))
        got = [(r.name, r.error_code, r.error_message) for r in resp.results]
        return sorted(got[:2]) + got[2:]

    want = sorted([(dup_ok, INVALID_REQUEST, DUPLICATE_MESSAGE),
                   (dup_no, INVALID_REQUEST, DUPLICATE_MESSAGE)]) + [
        (refused, TOPIC_AUTHORIZATION_FAILED, None), (grown, 0, None)]
    assert eventually(lambda: grow(True), lambda got: got == want) == want  # ACLs land later
    assert grow(False) == want


def test_delete_records_needs_delete_on_the_topic(broker, pki):
    Req = DeleteRecordsRequest[2]

    def delete(names) -> dict:
        resp = alice_call(broker, pki, Req(topics=[Req.DeleteRecordsTopic(
            name=n, partitions=[Req.DeleteRecordsTopic.DeleteRecordsPartition(
                partition_index=0, offset=0)]) for n in names], timeout_ms=20000))
        return {t.name: [(p.error_code, p.low_watermark) for p in t.partitions]
                for t in resp.topics}

    _needs(broker, pki, "dr", AclOperation.DELETE, delete,
           [(TOPIC_AUTHORIZATION_FAILED, -1)], [(0, 0)])


def test_delete_topics_refusals(broker, pki):
    """Without DESCRIBE: refused, existing or not; with DESCRIBE but not DELETE: an existing
    topic refused, a missing one UNKNOWN_TOPIC_OR_PARTITION; refusals carry Kafka's message
    and the zero id."""
    pfx = _topic("dt") + "-"
    kept, missing, hidden = pfx + "kept", pfx + "missing", _topic("dt-hidden")
    for t in (kept, hidden):
        create_topic(broker[0], t)
    allow(broker, pki, (ResourceType.TOPIC, pfx, ResourcePatternType.PREFIXED,
                        AclOperation.DESCRIBE))
    Req = DeleteTopicsRequest[6]

    def delete() -> dict:
        resp = alice_call(broker, pki, Req(topics=[Req.DeleteTopicState(
            name=n, topic_id=ZERO_ID) for n in (kept, missing, hidden)], timeout_ms=20000))
        return {r.name: (r.error_code, r.error_message, r.topic_id) for r in resp.responses}

    # kafka-python decodes the zero uuid as None
    refusal = (TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.", None)
    want = {kept: refusal, hidden: refusal,
            missing: (UNKNOWN_TOPIC_OR_PARTITION,
                      "This server does not host this topic-partition.", None)}
    assert eventually(delete, lambda got: got == want) == want


# --- configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) ---

CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_CONFIG, BROKER_CONFIG, BROKER_LOGGER_CONFIG = 2, 4, 8
TOPIC_REFUSED = (TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
CLUSTER_REFUSED = (CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def _node_id(broker) -> str:
    with connect(broker[0]) as s:
        return str(call(s, MetadataRequest[1](topics=[])).brokers[0].node_id)


def test_describe_configs_per_resource(broker, pki):
    """DESCRIBE_CONFIGS on the topic, or on the cluster for BROKER and BROKER_LOGGER; refused
    resources come after the answered ones, with the error's own message and no configs."""
    seen, hidden = _topic("dc-seen"), _topic("dc-hidden")
    for t in (seen, hidden):
        create_topic(broker[0], t)
    allow(broker, pki, _literal(seen, DESCRIBE_CONFIGS))
    node = _node_id(broker)
    Req = DescribeConfigsRequest[4]

    def describe() -> list:
        resp = alice_call(broker, pki, Req(resources=[
            Req.DescribeConfigsResource(resource_type=rt, resource_name=n,
                                        configuration_keys=None)
            for rt, n in ((TOPIC_CONFIG, hidden), (BROKER_CONFIG, node),
                          (BROKER_LOGGER_CONFIG, node), (TOPIC_CONFIG, seen))]))
        return [(r.resource_name, r.error_code, r.error_message, len(r.configs) > 0)
                for r in resp.results]

    want = [(seen, 0, "", True), (hidden, *TOPIC_REFUSED, False), (node, *CLUSTER_REFUSED, False),
            (node, *CLUSTER_REFUSED, False)]
    assert eventually(describe, lambda got: got == want) == want


def test_alter_configs_per_resource(broker, pki):
    """ALTER_CONFIGS on the topic, or on the cluster for BROKER (and BROKER_LOGGER in the
    incremental API), for AlterConfigs and IncrementalAlterConfigs alike."""
    mine, other = _topic("ac-mine"), _topic("ac-other")
    for t in (mine, other):
        create_topic(broker[0], t)
    allow(broker, pki, _literal(mine, ALTER_CONFIGS))
    node = _node_id(broker)
    Legacy, Incr = AlterConfigsRequest[2], IncrementalAlterConfigsRequest[1]

    def legacy() -> dict:
        R = Legacy.AlterConfigsResource
        resp = alice_call(broker, pki, Legacy(resources=[
            R(resource_type=rt, resource_name=n, configs=[
                R.AlterableConfig(name=k, value=v)]) for rt, n, k, v in (
                (TOPIC_CONFIG, mine, "retention.ms", "3600000"),
                (TOPIC_CONFIG, other, "retention.ms", "3600000"),
                (BROKER_CONFIG, node, "log.cleaner.threads", "2"))], validate_only=True))
        return {(r.resource_type, r.resource_name): (r.error_code, r.error_message)
                for r in resp.responses}

    def incremental() -> dict:
        R = Incr.AlterConfigsResource
        resp = alice_call(broker, pki, Incr(resources=[
            R(resource_type=rt, resource_name=n, configs=[
                R.AlterableConfig(name=k, config_operation=0, value=v)]) for rt, n, k, v in (
                (TOPIC_CONFIG, mine, "retention.ms", "3600000"),
                (TOPIC_CONFIG, other, "retention.ms", "3600000"),
                (BROKER_CONFIG, node, "log.cleaner.threads", "2"),
                (BROKER_LOGGER_CONFIG, node, "root", "INFO"))], validate_only=True))
        return {(r.resource_type, r.resource_name): (r.error_code, r.error_message)
                for r in resp.responses}

    want = {(TOPIC_CONFIG, mine): (0, None), (TOPIC_CONFIG, other): TOPIC_REFUSED,
            (BROKER_CONFIG, node): CLUSTER_REFUSED}
    assert eventually(legacy, lambda got: got == want) == want
    want[(BROKER_LOGGER_CONFIG, node)] = (CLUSTER_AUTHORIZATION_FAILED, None)  # Kafka's broker
    assert incremental() == want


# --- groups' offsets, epochs, producers, transactions ---

GROUP_REFUSED_CODE, CLUSTER_REFUSED_CODE = GROUP_AUTHORIZATION_FAILED, 31


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(broker, pki):
    topic, group = _topic("od"), _topic("od-grp")
    create_topic(broker[0], topic)
    admin = Consumer({"bootstrap.servers": broker[1], **_tls_conf(pki, "admin"),
                      "group.id": group, "enable.auto.commit": False})
    def commit():  # Kafka creates its offsets topic at the first commit: NOT_COORDINATOR
        try:
            return admin.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        except KafkaException as e:
            return e

    try:  # the group exists, with a committed offset and no members
        eventually(commit, lambda r: not isinstance(r, KafkaException), timeout=30)
    finally:
        admin.close()
    Req = OffsetDeleteRequest[0]

    def delete():
        resp = alice_call(broker, pki, Req(group_id=group, topics=[Req.OffsetDeleteRequestTopic(
            name=topic, partitions=[Req.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                partition_index=0)])]))
        return resp.error_code, [(t.name, [p.error_code for p in t.partitions])
                                 for t in resp.topics]

    allow(broker, pki, _literal(group, AclOperation.READ, ResourceType.GROUP))
    assert eventually(delete, lambda got: got[0] == GROUP_AUTHORIZATION_FAILED) == \
        (GROUP_AUTHORIZATION_FAILED, [])
    allow(broker, pki, _literal(group, AclOperation.DELETE, ResourceType.GROUP))
    want = (0, [(topic, [TOPIC_AUTHORIZATION_FAILED])])
    assert eventually(delete, lambda got: got == want) == want


def test_offset_for_leader_epoch_needs_describe_refusals_last(broker, pki):
    seen, hidden = _topic("ofle-seen"), _topic("ofle-hidden")
    for t in (seen, hidden):
        create_topic(broker[0], t)
    allow(broker, pki, _literal(seen, AclOperation.DESCRIBE))
    Req = OffsetForLeaderEpochRequest[4]
    Part = Req.OffsetForLeaderTopic.OffsetForLeaderPartition

    def epochs():
        resp = alice_call(broker, pki, Req(replica_id=-1, topics=[Req.OffsetForLeaderTopic(
            topic=t, partitions=[Part(partition=0, current_leader_epoch=-1, leader_epoch=0)])
            for t in (hidden, seen)]))
        return [(t.topic, [(p.error_code, p.end_offset) for p in t.partitions])
                for t in resp.topics]

    want = [(seen, [(0, 0)]), (hidden, [(TOPIC_AUTHORIZATION_FAILED, -1)])]
    assert eventually(epochs, lambda got: got == want) == want


def test_describe_producers_needs_read(broker, pki):
    topic = _topic("dp")
    create_topic(broker[0], topic)
    allow(broker, pki, _literal(topic, AclOperation.DESCRIBE))
    Req = DescribeProducersRequest[0]

    def describe():
        resp = alice_call(broker, pki, Req(topics=[Req.TopicRequest(name=topic,
                                                                    partition_indexes=[0])]))
        return [(p.error_code, p.error_message) for p in resp.topics[0].partitions]

    assert describe() == [TOPIC_REFUSED]
    allow(broker, pki, _literal(topic, AclOperation.READ))
    assert eventually(describe, lambda got: got[0][0] == 0) == [(0, None)]


def test_transactions_need_describe_on_the_transactional_id(broker, pki):
    """DescribeTransactions: TRANSACTIONAL_ID_AUTHORIZATION_FAILED without DESCRIBE;
    ListTransactions leaves out the ids alice may not describe."""
    topic, stem = _topic("tx"), uuid.uuid4().hex[:8]
    seen, hidden = f"lt-seen-{stem}", f"lt-hidden-{stem}"
    create_topic(broker[0], topic)
    for txn in (seen, hidden):
        p = Producer({"bootstrap.servers": broker[1], **_tls_conf(pki, "admin"),
                      "transactional.id": txn})
        p.init_transactions(30)
        p.flush(5)
    allow(broker, pki, _literal(seen, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID))

    def describe():
        resp = alice_call(broker, pki, DescribeTransactionsRequest[0](
            transactional_ids=[hidden, seen]))
        return [(s.transactional_id, s.error_code, s.transaction_state)
                for s in resp.transaction_states]

    want = [(hidden, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ""), (seen, 0, "Empty")]
    assert eventually(describe, lambda got: got == want) == want
    listed = {s.transactional_id for s in alice_call(
        broker, pki, ListTransactionsRequest[1]()).transaction_states}
    assert seen in listed and hidden not in listed


def test_describe_topic_partitions_needs_describe(broker, pki):
    """Named topics without DESCRIBE come after the others, refused with the zero id, whether
    they exist or not; topic_authorized_operations are alice's."""
    seen, hidden, missing = _topic("dtp-seen"), _topic("dtp-hidden"), _topic("dtp-missing")
    for t in (seen, hidden):
        create_topic(broker[0], t)
    allow(broker, pki, _literal(seen, AclOperation.DESCRIBE))
    Req = DescribeTopicPartitionsRequest[0]

    def describe():
        resp = alice_call(broker, pki, Req(topics=[Req.TopicRequest(name=n) for n in (
            hidden, missing, seen)], response_partition_limit=2000, cursor=None))
        return [(t.name, t.error_code, t.topic_id is None, len(t.partitions),
                 t.topic_authorized_operations) for t in resp.topics]

    got = eventually(describe, lambda got: got[0][1] == 0)
    assert got[0] == (seen, 0, False, 1, 1 << DESCRIBE)
    assert sorted(got[1:]) == sorted([(hidden, TOPIC_AUTHORIZATION_FAILED, True, 0, -(1 << 31)),
                                      (missing, TOPIC_AUTHORIZATION_FAILED, True, 0, -(1 << 31))])


def test_consumer_group_protocol_needs_read_and_describe(broker, pki, request):
    """ConsumerGroupHeartbeat: READ on the group, then DESCRIBE on the subscribed topics;
    ConsumerGroupDescribe: DESCRIBE on the group, refusals first (Kafka 4.x KafkaApis).
    No reference run: Kafka 3.8 does not serve KIP-848 groups unless asked to."""
    if request.node.callspec.params["broker"] == "kafka":
        pytest.skip("Kafka 3.8 serves ConsumerGroupHeartbeat only with its early-access flag")
    from datetime import timedelta
    from tests.integration.test_groups_helpers import RawClient
    topic, hidden, group, other = _topic("cg"), _topic("cg-hidden"), _topic("cgg"), _topic("cgo")
    for t in (topic, hidden):
        create_topic(broker[0], t)
    c = RawClient.__new__(RawClient)  # its kio requests, over alice's TLS connection
    c.sock, c.client_id, c.corr, c.pending = alice_socket(broker, pki), b"alice", 0, []

    def heartbeat(topics):
        r = c.call(68, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
                   instance_id=None, rack_id=None, rebalance_timeout=timedelta(seconds=30),
                   subscribed_topic_names=tuple(topics), subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=())
        return r.error_code, r.error_message

    try:
        assert heartbeat([topic]) == (GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
        allow(broker, pki, _literal(group, AclOperation.READ, ResourceType.GROUP),
              _literal(topic, AclOperation.DESCRIBE))
        assert heartbeat([topic, hidden]) == (TOPIC_AUTHORIZATION_FAILED, None)
        assert heartbeat([topic]) == (0, None)
        r = c.call(69, 1, group_ids=(other, group), include_authorized_operations=True)
        assert [(g.group_id, g.error_code, g.authorized_operations) for g in r.groups] == [
            (other, GROUP_AUTHORIZATION_FAILED, -(1 << 31)),
            (group, 0, (1 << READ) | (1 << DESCRIBE))]  # READ implies DESCRIBE
    finally:
        c.sock.close()


def test_share_group_apis_need_the_group(broker, pki, request):
    """ShareGroupHeartbeat (READ), ShareGroupDescribe and DescribeShareGroupOffsets
    (DESCRIBE), DeleteShareGroupOffsets (DELETE) refuse a group alice has no ACL on, as Kafka
    4.x. No reference run: Kafka 3.8 has no share groups."""
    if request.node.callspec.params["broker"] == "kafka":
        pytest.skip("Kafka 3.8 does not serve share groups")
    from tests.integration.test_groups_helpers import RawClient
    group, topic = _topic("sg"), _topic("sgt")
    create_topic(broker[0], topic)
    c = RawClient.__new__(RawClient)
    c.sock, c.client_id, c.corr, c.pending = alice_socket(broker, pki), b"alice", 0, []
    refused = (GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    try:
        hb = c.call(76, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
                    rack_id=None, subscribed_topic_names=(topic,))
        described = c.call(77, 1, group_ids=(group,), include_authorized_operations=True)
        m90, m92 = c.schema(90, 0), c.schema(92, 0)
        offsets = c.call(90, 0, groups=(m90.DescribeShareGroupOffsetsRequestGroup(
            group_id=group, topics=None),))
        deleted = c.call(92, 0, group_id=group, topics=(
            m92.DeleteShareGroupOffsetsRequestTopic(topic_name=topic),))
    finally:
        c.sock.close()
    assert (hb.error_code, hb.error_message) == refused
    # the describing APIs set the code alone (KafkaApis.handleShareGroupDescribe /
    # handleDescribeShareGroupOffsetsRequest)
    assert [(g.error_code, g.error_message) for g in described.groups] == [
        (GROUP_AUTHORIZATION_FAILED, None)]
    assert [(g.error_code, g.error_message) for g in offsets.groups] == [
        (GROUP_AUTHORIZATION_FAILED, None)]
    assert (deleted.error_code, deleted.error_message, deleted.responses) == (*refused, ())
