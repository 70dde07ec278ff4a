# CreateAcls / DescribeAcls / DeleteAcls against kafkalite and the real Kafka 3.8, each with
# authorizer.class.name=StandardAuthorizer and super.users=User:ANONYMOUS (PLAINTEXT clients
# are User:ANONYMOUS): the same assertions hold on both, so the expectations are Kafka's own
# answers. Kafka's orders follow hash sets, so bindings are compared as sorted lists.
from __future__ import annotations

import contextlib
import uuid
from typing import Iterator

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)
from kafka.protocol.admin import (CreateAclsRequest, DeleteAclsRequest,
                                  DescribeAclsRequest)

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import call, connect
from tests.helpers.real_kafka import private_kafka

AUTHORIZED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}
ANY = 1


@contextlib.contextmanager
def kafkalite_with_acls(tmp_dir: str | None = None) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(data_dir=tmp_dir, settings=AUTHORIZED)
    try:
        bp.start()
        yield bp
    finally:
        bp.cleanup()


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def acl_broker(request) -> Iterator[str]:
    if request.param == "kafkalite":
        with kafkalite_with_acls() as bp:
            yield bp.bootstrap
    else:
        with private_kafka(AUTHORIZED) as bootstrap:
            yield bootstrap


# --- raw protocol -------------------------------------------------------------------------

def create(bs: str, *creations: tuple) -> list[tuple]:
    C = CreateAclsRequest[3]
    req = C(creations=[C.AclCreation(
        resource_type=rt, resource_name=n, resource_pattern_type=pt, principal=p, host=h,
        operation=op, permission_type=perm) for rt, n, pt, p, h, op, perm in creations])
    with connect(bs) as s:
        return [(r.error_code, r.error_message) for r in call(s, req).results]


def describe(bs: str, rt=ANY, name=None, pt=ANY, principal=None, host=None, op=ANY,
             perm=ANY) -> tuple:
    req = DescribeAclsRequest[3](resource_type_filter=rt, resource_name_filter=name,
                                 pattern_type_filter=pt, principal_filter=principal,
                                 host_filter=host, operation=op, permission_type=perm)
    with connect(bs) as s:
        r = call(s, req)
    return r.error_code, r.error_message, sorted(
        (x.resource_type, x.resource_name, x.pattern_type, a.principal, a.host, a.operation,
         a.permission_type) for x in r.resources for a in x.acls)


def delete(bs: str, *filters: tuple) -> list[tuple]:
    D = DeleteAclsRequest[3]
    req = D(filters=[D.DeleteAclsFilter(
        resource_type_filter=rt, resource_name_filter=n, pattern_type_filter=pt,
        principal_filter=p, host_filter=h, operation=op, permission_type=perm)
        for rt, n, pt, p, h, op, perm in filters])
    with connect(bs) as s:
        r = call(s, req)
    return [(f.error_code, f.error_message, sorted(
        (m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
         m.permission_type) for m in f.matching_acls)) for f in r.filter_results]


def closes(fn, *args, **kwargs) -> bool:
    try:
        fn(*args, **kwargs)
    except ConnectionError:
        return True
    return False


TOPIC, GROUP, CLUSTER, USER = 2, 3, 4, 7
LITERAL, PREFIXED, MATCH = 3, 4, 2
READ, WRITE, ALL, DESCRIBE = 3, 4, 2, 8
DENY, ALLOW = 2, 3


def test_acl_requests_validated_as_kafka(acl_broker):
    bs, x = acl_broker, uuid.uuid4().hex[:8]
    ok = (0, "")
    assert create(bs, (TOPIC, f"{x}t", LITERAL, "User:a", "*", READ, ALLOW),
                  (TOPIC, f"{x}t", LITERAL, "User:a", "*", READ, ALLOW),
                  (TOPIC, "", LITERAL, "User:a", "*", READ, ALLOW),
                  (CLUSTER, x, LITERAL, "User:a", "*", READ, ALLOW),
                  (TOPIC, x, LITERAL, "User:a", "*", 99, ALLOW),
                  (99, x, LITERAL, "User:a", "*", READ, ALLOW),
                  (TOPIC, x, 99, "User:a", "*", READ, ALLOW),
                  (TOPIC, x, LITERAL, "User:a", "*", READ, 99),
                  # Kafka 3.8 takes any principal and host
                  (TOPIC, x, LITERAL, f"no-colon{x}", "", READ, ALLOW),
                  (USER, x, LITERAL, "User:a", "*", ALL, DENY)) == [
        ok, ok, (42, "Invalid empty resource name"),
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid operation UNKNOWN"), (42, "Invalid resourceType UNKNOWN"),
        (42, "Invalid patternType UNKNOWN"), (42, "Invalid permissionType UNKNOWN"), ok, ok]
    # ANY or MATCH anywhere: every creation of the request fails and none is made.
    for bad in [(ANY, x, LITERAL, "User:a", "*", READ, ALLOW),
                (TOPIC, x, MATCH, "User:a", "*", READ, ALLOW),
                (TOPIC, x, LITERAL, "User:a", "*", ANY, ALLOW)]:
        assert create(bs, (TOPIC, f"{x}new", LITERAL, "User:a", "*", READ, ALLOW), bad) == \
            [(-1, None), (-1, None)]
    assert describe(bs, name=f"{x}new")[2] == []
    # A raw UNKNOWN (0) closes the connection, in creations and filters alike.
    assert closes(create, bs, (0, x, LITERAL, "User:a", "*", READ, ALLOW))
    assert closes(describe, bs, pt=0)
    assert closes(delete, bs, (ANY, None, ANY, None, None, 0, ANY))
    assert describe(bs, rt=99) == (0, "", [])
    assert delete(bs, (99, None, ANY, None, None, ANY, ANY),
                  (ANY, None, ANY, None, None, 99, ANY)) == [
        (42, "Unknown patternFilter.", []), (42, "Unknown entryFilter.", [])]
    everything = [(TOPIC, f"{x}t", LITERAL, "User:a", "*", READ, ALLOW),
                  (TOPIC, x, LITERAL, f"no-colon{x}", "", READ, ALLOW),
                  (USER, x, LITERAL, "User:a", "*", ALL, DENY)]
    for n in (x, f"{x}t"):
        assert delete(bs, (ANY, n, ANY, None, None, ANY, ANY)) == [
            (0, None, sorted(b for b in everything if b[1] == n))]
    assert describe(bs, name=x) == (0, "", [])


def test_filters_through_confluent_admin(acl_broker):
    bs, x = acl_broker, uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})
    T, G = ResourceType.TOPIC, ResourceType.GROUP
    LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    A, D = AclPermissionType.ALLOW, AclPermissionType.DENY
    bindings = [AclBinding(T, f"{x}-orders", LIT, "User:alice", "*", AclOperation.READ, A),
                AclBinding(T, f"{x}-", PRE, "User:bob", "*", AclOperation.WRITE, A),
                AclBinding(T, f"{x}-orders", LIT, "User:*", "10.0.0.1", AclOperation.ALL, D),
                AclBinding(G, f"{x}-g", PRE, "User:alice", "*", AclOperation.READ, A)]
    for f in admin.create_acls(bindings, request_timeout=15).values():
        assert f.result() is None

    def listed(rt=ResourceType.ANY, name=None, pt=ResourcePatternType.ANY, principal=None,
               host=None, op=AclOperation.ANY, perm=AclPermissionType.ANY):
        found = admin.describe_acls(AclBindingFilter(rt, name, pt, principal, host, op, perm),
                                    request_timeout=15).result()
        return sorted((str(b) for b in found if x in b.name))
    s = lambda *bs: sorted(str(b) for b in bs)  # noqa: E731
    assert listed() == s(*bindings)
    assert listed(T, f"{x}-orders", ResourcePatternType.MATCH) == s(*bindings[:3])
    assert listed(T, f"{x}-other", ResourcePatternType.MATCH) == s(bindings[1])
    assert listed(name=f"{x}-orders") == s(bindings[0], bindings[2])
    assert listed(principal="User:alice") == s(bindings[0], bindings[3])
    assert listed(host="10.0.0.1", perm=D) == s(bindings[2])
    assert listed(op=AclOperation.WRITE) == s(bindings[1])
    assert listed(G, pt=PRE) == s(bindings[3])
    gone = admin.delete_acls([AclBindingFilter(T, None, ResourcePatternType.ANY, "User:bob",
                                               None, AclOperation.ANY,
                                               AclPermissionType.ANY),
                              AclBindingFilter(ResourceType.ANY, f"{x}-orders",
                                               ResourcePatternType.MATCH, None, None,
                                               AclOperation.ANY, AclPermissionType.ANY)],
                             request_timeout=15)
    results = [sorted(str(b) for b in f.result()) for f in gone.values()]
    assert results == [s(bindings[1]), s(*bindings[:3])]
    assert listed() == s(bindings[3])


def test_acl_apis_without_an_authorizer(any_broker):
    x = uuid.uuid4().hex[:8]
    assert create(any_broker, (TOPIC, x, LITERAL, "User:a", "*", READ, ALLOW)) == [
        (54, "No Authorizer is configured.")]
    assert describe(any_broker) == (54, "No Authorizer is configured on the broker", [])
    assert delete(any_broker, (ANY, None, ANY, None, None, ANY, ANY)) == [
        (54, "No Authorizer is configured.", [])]


def test_acls_survive_a_restart(tmp_path):
    with kafkalite_with_acls(str(tmp_path / "data")) as bp:
        binding = (GROUP, "g", PREFIXED, "User:alice", "*", READ, ALLOW)
        assert create(bp.bootstrap, binding) == [(0, "")]
        bp.restart()
        assert describe(bp.bootstrap) == (0, "", [binding])
        assert delete(bp.bootstrap, (ANY, None, ANY, None, None, ANY, ANY)) == [
            (0, None, [binding])]
        bp.restart(hard=True)
        assert describe(bp.bootstrap) == (0, "", [])
