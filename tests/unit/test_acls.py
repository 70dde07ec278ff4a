"""The ACL authorizer's rules (security/acls.py), each against a small set of bindings."""
from __future__ import annotations

import asyncio
import json
import os

import pytest

from kafkalite.security.acls import (AclBinding, AclFilter, Authorizer, Operation as Op,
                                     PatternType as P, Permission, ResourceType as R)

LIT, PRE = P.LITERAL, P.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rt=R.TOPIC, name="t", pt=LIT, principal="User:alice", host="*", op=Op.READ,
        perm=ALLOW) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def auth(*bindings, super_users="", allow_if_no_acl=False, state_dir=None) -> Authorizer:
    a = Authorizer(state_dir, super_users, allow_if_no_acl)
    results = asyncio.run(a.create(list(bindings)))
    assert all(code == 0 for code, _ in results), results
    return a


def ok(a, op=Op.READ, rt=R.TOPIC, name="t", principal="User:alice", host="10.0.0.1"):
    return a.authorize(principal, host, op, rt, name)


def test_allow_needs_a_matching_principal_host_and_operation():
    a = auth(acl(host="10.0.0.1"))
    assert ok(a)
    assert not ok(a, principal="User:bob")
    assert not ok(a, host="10.0.0.2")
    assert not ok(a, op=Op.WRITE)
    assert not ok(a, rt=R.GROUP)


def test_deny_wins_over_allow_and_all_covers_every_operation():
    a = auth(acl(op=Op.ALL), acl(op=Op.WRITE, perm=DENY))
    assert ok(a, Op.READ) and ok(a, Op.DELETE) and ok(a, Op.IDEMPOTENT_WRITE)
    assert not ok(a, Op.WRITE)
    b = auth(acl(op=Op.READ), acl(name="*", principal="User:*", op=Op.ALL, perm=DENY))
    assert not ok(b, Op.READ)


def test_describe_is_implied_by_allow_only():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert ok(auth(acl(op=op)), Op.DESCRIBE), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION):
        assert not ok(auth(acl(op=op)), Op.DESCRIBE), op
    assert ok(auth(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not ok(auth(acl(op=Op.ALTER)), Op.DESCRIBE_CONFIGS)
    # A DENY READ denies READ only: DESCRIBE stays allowed by an ALLOW DESCRIBE.
    a = auth(acl(op=Op.READ, perm=DENY), acl(op=Op.DESCRIBE))
    assert ok(a, Op.DESCRIBE) and not ok(a, Op.READ)


def test_wildcards_prefixes_and_literals():
    a = auth(acl(name="*", principal="User:*", op=Op.WRITE), acl(name="pay", pt=PRE),
             acl(name="logs", op=Op.DELETE))
    assert ok(a, Op.WRITE, name="anything", principal="User:zed")
    assert ok(a, Op.READ, name="payments") and ok(a, Op.READ, name="pay")
    assert not ok(a, Op.READ, name="pa")
    assert ok(a, Op.DELETE, name="logs") and not ok(a, Op.DELETE, name="logs2")
    # "*" as a PREFIXED name is a literal asterisk prefix, not a wildcard.
    b = auth(acl(name="*", pt=PRE))
    assert not ok(b, name="x") and ok(b, name="*x")


def test_super_users_and_allow_everyone_if_no_acl_found():
    a = auth(acl(op=Op.READ, perm=DENY), super_users="User:admin; User:ops")
    assert ok(a, principal="User:admin") and ok(a, Op.ALTER, R.CLUSTER, "kafka-cluster",
                                                principal="User:ops")
    assert not ok(a)
    assert not ok(auth(), name="free")
    open_ = auth(acl(name="guarded", principal="User:bob"), allow_if_no_acl=True)
    assert ok(open_, name="free")
    # Any ACL on the resource, even for someone else, ends the default allow.
    assert not ok(open_, name="guarded")


def test_filters_as_kafka_acl_binding_filter():
    bindings = [acl(name="t1"), acl(name="t", pt=PRE, principal="User:bob", op=Op.WRITE),
                acl(name="*", principal="User:*", op=Op.ALL, perm=DENY),
                acl(rt=R.GROUP, name="g", host="1.2.3.4"), acl(name="other")]
    a = auth(*bindings)

    def names(rt=R.ANY, name=None, pt=P.ANY, principal=None, host=None, op=Op.ANY,
              perm=Permission.ANY):
        return [(b.resource_type, b.name) for b in
                a.describe(AclFilter(rt, name, pt, principal, host, op, perm))]
    assert len(names()) == 5
    assert names(pt=P.MATCH, name="t1") == [(R.TOPIC, "t1"), (R.TOPIC, "t"), (R.TOPIC, "*")]
    assert names(pt=P.MATCH, name="tx", rt=R.TOPIC) == [(R.TOPIC, "t"), (R.TOPIC, "*")]
    assert names(pt=LIT, name="*") == [(R.TOPIC, "*")]
    assert names(name="t") == [(R.TOPIC, "t")]  # ANY: exact name, either pattern type
    assert names(principal="User:bob") == [(R.TOPIC, "t")]
    assert names(host="1.2.3.4") == [(R.GROUP, "g")]
    assert names(op=Op.ALL) == [(R.TOPIC, "*")]  # ALL in a filter is not ANY
    assert names(perm=DENY) == [(R.TOPIC, "*")]
    assert names(rt=R.UNKNOWN) == [] and names(op=Op.UNKNOWN) == []


def test_create_validation_and_delete():
    a = Authorizer(None)
    run = asyncio.run
    assert run(a.create([acl(), acl(), acl(rt=R.CLUSTER, name="c"), acl(name=""),
                         acl(op=Op.UNKNOWN), acl(pt=P.UNKNOWN)])) == [
        (0, ""), (0, ""),
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid empty resource name"), (42, "Invalid operation UNKNOWN"),
        (42, "Invalid patternType UNKNOWN")]
    assert len(a.acls) == 1  # a duplicate is stored once
    # ANY or MATCH anywhere fails the whole request, creating nothing.
    for bad in (acl(op=Op.ANY), acl(pt=P.MATCH), acl(rt=R.ANY), acl(perm=Permission.ANY)):
        assert run(a.create([acl(name="new"), bad])) == [(-1, None), (-1, None)]
    assert len(a.acls) == 1
    every = AclFilter(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY)
    bad_pattern = AclFilter(R.UNKNOWN, None, P.ANY, None, None, Op.ANY, Permission.ANY)
    bad_entry = AclFilter(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.UNKNOWN)
    out = run(a.delete([every, every, bad_pattern, bad_entry]))
    assert out == [(0, None, [acl()]), (0, None, [acl()]),
                   (42, "Unknown patternFilter.", []), (42, "Unknown entryFilter.", [])]
    assert not a.acls and not ok(a)


def test_acls_survive_a_reload(tmp_path):
    state = str(tmp_path / ".kafkalite")
    a = auth(acl(), acl(rt=R.GROUP, name="g", pt=PRE, op=Op.ALL, perm=DENY), state_dir=state)
    assert os.path.exists(os.path.join(state, "acls.json"))
    b = Authorizer(state)
    b.load()
    assert list(b.acls) == list(a.acls)
    assert ok(b) and not ok(b, Op.READ, R.GROUP, "g1")
    asyncio.run(b.delete([AclFilter(R.GROUP, None, P.ANY, None, None, Op.ANY,
                                    Permission.ANY)]))
    c = Authorizer(state)
    c.load()
    assert list(c.acls) == [acl()]
    with open(os.path.join(state, "acls.json")) as f:
        assert json.load(f) == [acl().as_list()]


@pytest.mark.parametrize("principal", ["User:ANONYMOUS", "User:*"])
def test_user_wildcard_principal_matches_everyone(principal):
    a = auth(acl(principal="User:*"))
    assert ok(a, principal=principal)


def test_check_hook_takes_the_contexts_principal_and_host():
    from types import SimpleNamespace

    from kafkalite.broker.broker import RequestContext
    from kafkalite.security.acl_check import check
    broker = SimpleNamespace(authorizer=None)
    ctx = RequestContext(broker, 0, 9, 1, "c", "10.0.0.1:5555")
    assert check(ctx, Op.WRITE, R.TOPIC, "t")  # no authorizer: everything passes
    broker.authorizer = auth(acl(principal="User:ANONYMOUS", host="10.0.0.1", op=Op.WRITE))
    assert check(ctx, Op.WRITE, R.TOPIC, "t")  # PLAINTEXT: User:ANONYMOUS
    assert not check(RequestContext(broker, 0, 9, 1, "c", "10.0.0.2:1"), Op.WRITE, R.TOPIC,
                     "t")
    assert not check(ctx, Op.READ, R.TOPIC, "t")
