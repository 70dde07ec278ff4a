"""The ACL matrix (issue 15): for every API key kafkalite serves (its handler registry; a key
without an entry fails test_every_served_key_has_an_entry, so a new API cannot skip
authorization), a principal with no ACL sends one request and gets Kafka 3.8's refusal (the
codes of every resource in the answer); given the ACLs Kafka needs (operation + resource
type), the same request passes authorization and both brokers give the same answer. Where
Kafka checks several resources, the first ACL alone gives its per-resource answer too
(OffsetCommit with READ on the group only: the partition's TOPIC_AUTHORIZATION_FAILED).

One kafkalite and one Kafka 3.8 for the module, configured alike: sasl_targets.py's
SASL_PLAINTEXT listener, StandardAuthorizer, one PLAIN user per entry (so one entry's CLUSTER
ACLs cannot leak into another's), super users admin and ANONYMOUS (Kafka's controller
connection and both brokers' PLAINTEXT listener, where the set-up runs). Kafka applies ACLs
asynchronously: the allowed probe is retried, bounded. Keys Kafka 3.8 does not serve run on
kafkalite alone, with the reason."""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation as Op, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType as Rt)

from tests.helpers.kbatch import call, connect
from tests.helpers.real_kafka import create_topic, eventually

from . import acl_matrix_requests as rq
from .acl_matrix_requests import K, Names
from .sasl_targets import RawSasl, SASL_SETTINGS, Target, start_kafka, start_kafkalite

pytestmark = pytest.mark.timeout(600)

RUN = uuid.uuid4().hex[:6]
AUTH_CODES = {29, 30, 31, 53}  # TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
NO_KAFKA_848 = ("Kafka 3.8 lists KIP-848's keys but refuses them (UNSUPPORTED_VERSION) "
                "unless its early-access group.coordinator.rebalance.protocols has consumer")
NO_KAFKA_SHARE = "Kafka 3.8 has no share groups"
NO_ZK_MODE = ("ControlledShutdown is served in ZooKeeper mode only (both brokers here are "
              "single nodes without ZooKeeper)")
CLUSTER = "kafka-cluster"


@dataclass
class Case:
    id: str
    key: int
    request: Callable[[Names], Any]  # a kafka.protocol request, or (key, version, fields)
    refused: Any                      # Kafka 3.8's answer (see probe) without any ACL
    # the ACLs Kafka needs: (resource type, "topic" / "group" / "txn" / CLUSTER, operation)
    acls: list = field(default_factory=list)
    probe: Callable[[Any, Names], Any] | None = None  # answer -> what is compared (codes)
    topic: bool = False               # the topic exists (created by the admin)
    group: bool = False               # the group exists (an admin's committed offset)
    txn: bool = False                 # the transactional id exists (the admin's InitProducerId)
    kafka_absent: str | None = None   # why Kafka 3.8 cannot answer it
    cluster_only: str | None = None   # why neither single node answers it (checked elsewhere)
    granted: Callable[[Any], bool] | None = None  # the answer passed authorization
    # the first of `acls` only (the rest still missing): Kafka 3.8's per-resource answer
    partly: Any = None

    @property
    def user(self) -> str:
        return "m" + self.id.replace("-", "")

    def names(self) -> Names:
        return Names(f"mx-{self.id}-{RUN}", f"mx-g-{self.id}-{RUN}", f"mx-t-{self.id}-{RUN}")


def codes(obj: Any) -> list[int]:
    """Every error code of an answer, depth first in the answer's order: the request's own
    and each resource's."""
    out: list[int] = []
    if isinstance(obj, (list, tuple)):
        for item in obj:
            out += codes(item)
        return out
    if dataclasses.is_dataclass(obj):
        items = [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    elif getattr(obj, "_struct", None) is not None:
        items = []
        for f in obj._struct._fields:
            try:
                items.append((f.name, getattr(obj, f.name)))
            except AttributeError:  # not in this version
                pass
    else:
        return out
    for name, value in items:
        if name.endswith("error_code"):
            out.append(int(value))
        else:
            out += codes(value)
    return out


def _acl(case: Case, names: Names, acls: list) -> list[AclBinding]:
    where = {"topic": names.topic, "group": names.group, "txn": names.txn, CLUSTER: CLUSTER}
    return [AclBinding(rt, where[name], ResourcePatternType.LITERAL, f"User:{case.user}", "*",
                       op, AclPermissionType.ALLOW) for rt, name, op in acls]


# --- the entries: one or more per served key ---------------------------------------------

CASES: list[Case] = [
    Case("0", 0, rq.produce, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.WRITE)], topic=True),
    Case("1", 1, rq.fetch, [0, TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.READ)], topic=True),
    Case("2", 2, rq.list_offsets, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True),
    Case("3", 3, rq.metadata_one, [TOPIC_DENIED, 0], [(Rt.TOPIC, "topic", Op.DESCRIBE)],
         topic=True),
    Case("3-all", 3, rq.metadata_all, False, [(Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True,
         probe=rq.listed("topics", "name", "topic")),
    # served in a ZooKeeper cluster only: tests/cluster/test_controlled_shutdown.py asks it
    Case("7", 7, lambda n: None, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.CLUSTER_ACTION)],
         cluster_only=NO_ZK_MODE),
    Case("8", 8, rq.offset_commit, [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ),
                                                    (Rt.TOPIC, "topic", Op.READ)], topic=True,
         partly=[TOPIC_DENIED]),
    Case("9", 9, rq.offset_fetch, [0, GROUP_DENIED],
         [(Rt.GROUP, "group", Op.DESCRIBE), (Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True,
         partly=[0, TOPIC_DENIED, 0]),
    Case("10", 10, rq.find_coordinator(0), [0, GROUP_DENIED], [(Rt.GROUP, "group", Op.DESCRIBE)]),
    Case("10-txn", 10, rq.find_coordinator(1), [0, TXN_DENIED],
         [(Rt.TRANSACTIONAL_ID, "txn", Op.DESCRIBE)]),
    Case("11", 11, rq.join, [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ)]),
    Case("12", 12, lambda n: K.HeartbeatRequest[4](group_id=n.group, generation_id=1,
                                                   member_id="nobody"),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ)]),
    Case("13", 13, rq.leave, [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ)]),
    Case("14", 14, rq.sync, [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ)]),
    Case("15", 15, lambda n: K.DescribeGroupsRequest[5](groups=[n.group]), [GROUP_DENIED],
         [(Rt.GROUP, "group", Op.DESCRIBE)]),
    Case("16", 16, lambda n: K.ListGroupsRequest[4](), False,
         [(Rt.GROUP, "group", Op.DESCRIBE)], group=True,
         probe=rq.listed("groups", "group_id", "group")),
    Case("17", 17, lambda n: K.SaslHandshakeRequest[1](mechanism="PLAIN"), None),
    Case("18", 18, lambda n: K.ApiVersionsRequest[3](client_software_name="mx",
                                                     client_software_version="1"), None),
        # created, but its configs are TOPIC_AUTHORIZATION_FAILED without DESCRIBE_CONFIGS
    Case("19", 19, rq.create_topics, [TOPIC_DENIED, 0], [(Rt.TOPIC, "topic", Op.CREATE)],
         granted=lambda got: got == [0, TOPIC_DENIED]),
    Case("19-cluster", 19, rq.create_topics, [TOPIC_DENIED, 0], [(Rt.BROKER, CLUSTER, Op.CREATE)],
         granted=lambda got: got == [0, TOPIC_DENIED]),
    Case("20", 20, lambda n: K.DeleteTopicsRequest[6](topics=[
        K.DeleteTopicsRequest[6].DeleteTopicState(name=n.topic)], timeout_ms=15000),
         [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.DELETE)], topic=True),
    Case("21", 21, rq.delete_records, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.DELETE)],
         topic=True),
    Case("22", 22, lambda n: K.InitProducerIdRequest[4](transactional_id=n.txn,
                                                        transaction_timeout_ms=60000),
         [TXN_DENIED], [(Rt.TRANSACTIONAL_ID, "txn", Op.WRITE)]),
    Case("22-idem", 22, lambda n: K.InitProducerIdRequest[4](transactional_id=None,
                                                             transaction_timeout_ms=60000),
         [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.IDEMPOTENT_WRITE)]),
    Case("22-write", 22, lambda n: K.InitProducerIdRequest[4](transactional_id=None,
                                                              transaction_timeout_ms=60000),
         [CLUSTER_DENIED], [(Rt.TOPIC, "topic", Op.WRITE)]),
    Case("23", 23, rq.epochs, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True),
    Case("24", 24, rq.add_partitions, [0, TXN_DENIED], [(Rt.TRANSACTIONAL_ID, "txn", Op.WRITE),
                                                        (Rt.TOPIC, "topic", Op.WRITE)], topic=True,
         partly=[0, TOPIC_DENIED]),
    Case("25", 25, lambda n: K.AddOffsetsToTxnRequest[3](
        transactional_id=n.txn, producer_id=0, producer_epoch=0, group_id=n.group),
         [TXN_DENIED], [(Rt.TRANSACTIONAL_ID, "txn", Op.WRITE), (Rt.GROUP, "group", Op.READ)],
         partly=[GROUP_DENIED]),
    Case("26", 26, lambda n: K.EndTxnRequest[3](transactional_id=n.txn, producer_id=0,
                                                producer_epoch=0, committed=False),
         [TXN_DENIED], [(Rt.TRANSACTIONAL_ID, "txn", Op.WRITE)]),
    Case("27", 27, rq.markers, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.CLUSTER_ACTION)],
         topic=True),
    Case("28", 28, rq.txn_offset_commit, [TXN_DENIED],
         [(Rt.TRANSACTIONAL_ID, "txn", Op.WRITE), (Rt.GROUP, "group", Op.READ),
          (Rt.TOPIC, "topic", Op.READ)], topic=True, partly=[GROUP_DENIED]),
    Case("29", 29, lambda n: rq.acl_filter(K.DescribeAclsRequest[3]), [CLUSTER_DENIED],
         [(Rt.BROKER, CLUSTER, Op.DESCRIBE)]),
    Case("30", 30, rq.create_acls, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.ALTER)]),
    Case("31", 31, lambda n: K.DeleteAclsRequest[3](filters=[rq.acl_filter(
        K.DeleteAclsRequest[3].DeleteAclsFilter)]), [CLUSTER_DENIED],
         [(Rt.BROKER, CLUSTER, Op.ALTER)]),
    Case("32", 32, rq.describe_configs, [TOPIC_DENIED],
         [(Rt.TOPIC, "topic", Op.DESCRIBE_CONFIGS)], topic=True),
    Case("33", 33, rq.alter_configs, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.ALTER_CONFIGS)],
         topic=True),
    Case("34", 34, rq.replica_log_dirs, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.ALTER)],
         topic=True),
    Case("35", 35, lambda n: K.DescribeLogDirsRequest[4](topics=None), [CLUSTER_DENIED],
         [(Rt.BROKER, CLUSTER, Op.DESCRIBE)]),
    Case("36", 36, lambda n: K.SaslAuthenticateRequest[2](auth_bytes=b"\0x\0y"), None),
    Case("37", 37, rq.create_partitions, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.ALTER)],
         topic=True),
    Case("42", 42, lambda n: K.DeleteGroupsRequest[2](groups_names=[n.group]), [GROUP_DENIED],
         [(Rt.GROUP, "group", Op.DELETE)], group=True),
    Case("43", 43, rq.elect, [CLUSTER_DENIED, CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.ALTER)],
         topic=True),
    Case("44", 44, rq.incremental, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.ALTER_CONFIGS)],
         topic=True),
    Case("45", 45, rq.reassign, [CLUSTER_DENIED, CLUSTER_DENIED],
         [(Rt.BROKER, CLUSTER, Op.ALTER)], topic=True),
    Case("46", 46, rq.list_reassign, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.DESCRIBE)],
         topic=True),
    Case("47", 47, rq.offset_delete, [GROUP_DENIED], [(Rt.GROUP, "group", Op.DELETE),
                                                      (Rt.TOPIC, "topic", Op.READ)],
         topic=True, group=True, partly=[0, TOPIC_DENIED]),
    Case("48", 48, lambda n: K.DescribeClientQuotasRequest[1](components=[], strict=False),
         [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.DESCRIBE_CONFIGS)]),
    Case("49", 49, rq.alter_quotas, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.ALTER_CONFIGS)]),
    Case("50", 50, lambda n: K.DescribeUserScramCredentialsRequest[0](users=[]),
         [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.DESCRIBE)]),
    Case("51", 51, rq.alter_scram, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.ALTER)]),
    Case("55", 55, rq.describe_quorum, [CLUSTER_DENIED], [(Rt.BROKER, CLUSTER, Op.DESCRIBE)]),
    # kio: kafka-python decodes the bit field into a set, losing Kafka's INT32_MIN
    Case("60", 60, rq.kio(60, 1, lambda n: dict(include_cluster_authorized_operations=True,
                                              endpoint_type=1)), (0, 0),
         [(Rt.BROKER, CLUSTER, Op.DESCRIBE)], probe=lambda r, n: (
             r.error_code, r.cluster_authorized_operations)),
    Case("61", 61, rq.describe_producers, [TOPIC_DENIED], [(Rt.TOPIC, "topic", Op.READ)],
         topic=True),
    Case("65", 65, lambda n: K.DescribeTransactionsRequest[0](transactional_ids=[n.txn]),
         [TXN_DENIED], [(Rt.TRANSACTIONAL_ID, "txn", Op.DESCRIBE)]),
    Case("66", 66, lambda n: K.ListTransactionsRequest[1](), False,
         [(Rt.TRANSACTIONAL_ID, "txn", Op.DESCRIBE)], txn=True,
         probe=rq.listed("transaction_states", "transactional_id", "txn")),
    Case("75", 75, rq.describe_topic_partitions, [TOPIC_DENIED],
         [(Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True),
    Case("68", 68, rq.kio(68, 1, rq.heartbeat_848), [GROUP_DENIED],
         [(Rt.GROUP, "group", Op.READ), (Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True,
         kafka_absent=NO_KAFKA_848, partly=[TOPIC_DENIED]),
    Case("69", 69, rq.kio(69, 1, lambda n: dict(group_ids=(n.group,),
                                              include_authorized_operations=True)),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.DESCRIBE)], kafka_absent=NO_KAFKA_848),
    Case("76", 76, rq.kio(76, 1, lambda n: dict(
        group_id=n.group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
        subscribed_topic_names=(n.topic,))), [GROUP_DENIED],
         [(Rt.GROUP, "group", Op.READ), (Rt.TOPIC, "topic", Op.DESCRIBE)], topic=True,
         kafka_absent=NO_KAFKA_SHARE),
    Case("77", 77, rq.kio(77, 1, lambda n: dict(group_ids=(n.group,),
                                              include_authorized_operations=True)),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.DESCRIBE)], kafka_absent=NO_KAFKA_SHARE),
    Case("78", 78, rq.kio(78, 1, rq.share_fetch), [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ)],
         kafka_absent=NO_KAFKA_SHARE),
    Case("79", 79, rq.kio(79, 1, lambda n: dict(group_id=n.group, member_id=uuid.uuid4().hex,
                                              share_session_epoch=1, topics=())),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ)], kafka_absent=NO_KAFKA_SHARE),
    Case("90", 90, rq.kio(90, 0, lambda n: dict(groups=(
        rq.schema(90, 0).DescribeShareGroupOffsetsRequestGroup(group_id=n.group, topics=None),))),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.DESCRIBE)], kafka_absent=NO_KAFKA_SHARE),
    Case("91", 91, rq.kio(91, 0, lambda n: dict(group_id=n.group, topics=(
        rq.schema(91, 0).AlterShareGroupOffsetsRequestTopic(topic_name=n.topic, partitions=(
            rq.schema(91, 0).AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                  start_offset=0),)),))),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.READ), (Rt.TOPIC, "topic", Op.READ)],
         topic=True, kafka_absent=NO_KAFKA_SHARE),
    Case("92", 92, rq.kio(92, 0, lambda n: dict(group_id=n.group, topics=(
        rq.schema(92, 0).DeleteShareGroupOffsetsRequestTopic(topic_name=n.topic),))),
         [GROUP_DENIED], [(Rt.GROUP, "group", Op.DELETE), (Rt.TOPIC, "topic", Op.READ)],
         topic=True, kafka_absent=NO_KAFKA_SHARE),
]
# SASL requests and ApiVersions are answered without authorization (refused=None: the
# answer with no ACL is the same as with them, and compared between the brokers).
NO_AUTHORIZATION = {17, 18, 36}

USERS = sorted({c.user for c in CASES})
PLAIN_JAAS = SASL_SETTINGS["listener.name.sasl_plaintext.plain.sasl.jaas.config"].rstrip(
    ";") + "".join(f' user_{u}="{u}-secret"' for u in USERS) + ";"
SETTINGS = {
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # ANONYMOUS: Kafka's own controller connection and the set-up over PLAINTEXT
    "super.users": "User:admin;User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def brokers():
    """{"kafkalite": Target, "kafka": Target} (no "kafka" where Kafka 3.8 cannot run)."""
    out: dict[str, Target] = {"kafkalite": start_kafkalite(SETTINGS, plaintext=True)}
    try:
        kafka = start_kafka(SETTINGS)
        if isinstance(kafka, Target):
            out["kafka"] = kafka
        for t in out.values():  # Kafka makes its coordinators' topics at the first lookup
            for key_type in (0, 1):
                req = K.FindCoordinatorRequest[4](key_type=key_type, coordinator_keys=["mx"])
                with connect(t.plaintext) as s:
                    got = eventually(lambda: codes(call(s, req)), lambda got: set(got) == {0},
                                     timeout=60)
                    assert set(got) == {0}, got
        yield out
    finally:
        for t in out.values():
            t.proc.cleanup()


def test_every_served_key_has_an_entry():
    import kafkalite.broker.handlers  # noqa: F401  (registers every handler)
    from kafkalite.broker.registry import HANDLERS
    missing = sorted(set(HANDLERS) - {c.key for c in CASES})
    assert not missing, f"served API keys with no ACL matrix entry: {missing}"
    assert {c.key for c in CASES if c.refused is None} == NO_AUTHORIZATION


def _ask(target: Target, case: Case, names: Names) -> Any:
    """The entry's request, sent by its own user over a fresh SASL/PLAIN connection."""
    c = RawSasl(target.bootstrap)
    try:
        assert c.login_plain(case.user, f"{case.user}-secret")[0] == 0
        req = case.request(names)
        if isinstance(req, tuple):  # kio: a key kafka-python has no classes for
            from tests.integration.test_groups_helpers import RawClient
            raw = RawClient.__new__(RawClient)
            raw.sock, raw.client_id, raw.corr, raw.pending = c.sock, b"mx", 0, []
            resp = raw.call(req[0], req[1], **req[2])
        else:
            resp = call(c.sock, req, correlation_id=100)
    finally:
        c.close()
    return (case.probe or (lambda r, n: codes(r)))(resp, names)


def _set_up(target: Target, case: Case, names: Names) -> None:
    """The entry's resources, made by ANONYMOUS (a super user) over PLAINTEXT."""
    if case.topic:
        create_topic(target.plaintext, names.topic)
    if case.group:  # a simple consumer's commit makes the group (retried while its
        R = K.OffsetCommitRequest[8]  # coordinator loads)
        T = R.OffsetCommitRequestTopic
        if not case.topic:
            create_topic(target.plaintext, names.topic)
        req = R(group_id=names.group, topics=rq.topic_parts(
            T, T.OffsetCommitRequestPartition, names, committed_offset=0,
            committed_metadata=""))
        with connect(target.plaintext) as s:
            assert eventually(lambda: codes(call(s, req)), lambda got: got == [0],
                              timeout=30) == [0]
    if case.txn:
        req = K.InitProducerIdRequest[4](transactional_id=names.txn,
                                         transaction_timeout_ms=60000)
        with connect(target.plaintext) as s:
            assert eventually(lambda: codes(call(s, req)), lambda got: got == [0],
                              timeout=30) == [0]


_ADMINS: dict[str, AdminClient] = {}


def _grant(target: Target, case: Case, names: Names, acls: list) -> None:
    if not acls:
        return
    admin = _ADMINS.setdefault(target.plaintext, AdminClient(
        {"bootstrap.servers": target.plaintext}))
    for fut in admin.create_acls(_acl(case, names, acls), request_timeout=30).values():
        fut.result(timeout=30)


def _granted(case: Case, got: Any) -> bool:
    if case.granted is not None:
        return case.granted(got)
    if isinstance(got, bool):
        return got
    if case.key == 60:
        return got[1] > 0
    return not AUTH_CODES & set(got)


# Coordinator answers Kafka gives while its internal topics are created: retried.
_LOADING = {14, 15, 16}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_acl_matrix(brokers, case):
    if case.cluster_only:
        pytest.skip(case.cluster_only)
    targets = {k: t for k, t in brokers.items() if not (k == "kafka" and case.kafka_absent)}
    names = case.names()
    for t in targets.values():
        _set_up(t, case, names)
    loaded = lambda got: isinstance(got, bool) or not _LOADING & set(  # noqa: E731
        got if isinstance(got, list) else [])
    before = {k: eventually(lambda: _ask(t, case, names), loaded, timeout=30)
              for k, t in targets.items()}
    if case.refused is not None:
        assert before == {k: case.refused for k in targets}, before
    if case.partly is not None:
        for t in targets.values():
            _grant(t, case, names, case.acls[:1])
        partly = {k: eventually(lambda: _ask(t, case, names),
                                lambda got: loaded(got) and got != case.refused, timeout=30)
                  for k, t in targets.items()}
        assert partly == {k: case.partly for k in targets}, partly
    for t in targets.values():
        _grant(t, case, names, case.acls)
    after = {k: eventually(lambda: _ask(t, case, names),
                           lambda got: loaded(got) and _granted(case, got), timeout=30)
             for k, t in targets.items()}
    if "kafka" in after:
        assert after["kafkalite"] == after["kafka"], after
    for k, got in after.items():
        assert _granted(case, got), (k, got)
    if case.refused is None and "kafka" in before:
        assert before["kafkalite"] == before["kafka"], before


def test_keys_run_on_kafkalite_alone_are_not_served_by_kafka(brokers):
    """The reasons those entries have no reference, as Kafka 3.8 configured as here shows
    them: the share-group keys are not in its ApiVersions; KIP-848's are, but the super user's
    ConsumerGroupDescribe gets UNSUPPORTED_VERSION."""
    if "kafka" not in brokers:
        pytest.skip("no Kafka 3.8 to ask")
    from tests.integration.test_groups_helpers import RawClient
    c = RawClient(brokers["kafka"].plaintext)
    try:
        listed = {k.api_key for k in c.call(18, 3, client_software_name="mx",
                                            client_software_version="1").api_keys}
        described = c.call(69, 0, group_ids=("mx",), include_authorized_operations=False)
    finally:
        c.close()
    absent = {c.key: c.kafka_absent for c in CASES if c.kafka_absent}
    assert {k for k, why in absent.items() if why == NO_KAFKA_SHARE} & listed == set()
    assert {k for k, why in absent.items() if why == NO_KAFKA_848} <= listed
    assert [g.error_code for g in described.groups] == [35]  # UNSUPPORTED_VERSION
    assert {c.key for c in CASES if not c.cluster_only} - set(absent) <= listed
    assert {c.key for c in CASES if c.cluster_only} & listed == set()
