# ACLs in a ZooKeeper-coordinated cluster (issue 17), as Kafka 3.8's ZooKeeper-mode
# AclAuthorizer keeps them: CreateAcls / DeleteAcls on one broker write the resource's znode
# under /kafka-acl (LITERAL) or /kafka-acl-extended/prefixed (PREFIXED) and announce it under
# /kafka-acl-changes or /kafka-acl-extended-changes; every broker follows and enforces it.
# Three kafkalite brokers with the authorizer on and allow.everyone.if.no.acl.found (the
# client, User:ANONYMOUS on PLAINTEXT, may administer ACLs while none names the cluster): a
# DENY of DESCRIBE created through broker 1 makes brokers 2 and 3 refuse the client's Metadata
# for the topic (TOPIC_AUTHORIZATION_FAILED instead of UNKNOWN_TOPIC_OR_PARTITION), a
# PREFIXED one too; DescribeAcls at broker 3 lists them; a DeleteAcls through broker 1 of the
# DENY (its ALLOW stays in the rewritten znode) lifts it everywhere, and a broker down
# meanwhile comes back with ZooKeeper's ACLs. The following and the purge of old
# notifications run on a fake clock against a real ZooKeeper, and concurrent writers of one
# resource (version conflicts, read again) lose no entry.
from __future__ import annotations

import asyncio
import time

from kafka.protocol import metadata

from kafkalite.clock import FakeClock
from kafkalite.cluster import acl_znodes as znodes
from kafkalite.cluster.notifications import CHANGE_EXPIRATION_MS
from kafkalite.cluster.zk import ZkClient
from kafkalite.cluster.zk_acls import AclChanges, ZkAcls
from kafkalite.security.acls import AclBinding, AclFilter, Authorizer
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually
from tests.integration.test_acls import create, delete, describe

SETTINGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}
TOPIC, GROUP, LITERAL, PREFIXED, ANY = 2, 3, 3, 4, 1
READ, DESCRIBE, DENY, ALLOW = 3, 8, 2, 3
ANON = "User:ANONYMOUS"
DENY_SECRET = (TOPIC, "secret", LITERAL, ANON, "*", DESCRIBE, DENY)
ALLOW_SECRET = (TOPIC, "secret", LITERAL, ANON, "*", DESCRIBE, ALLOW)
DENY_PREFIX = (TOPIC, "pre-", PREFIXED, ANON, "*", DESCRIBE, DENY)
ALLOWED, REFUSED = ErrorCode.unknown_topic_or_partition, ErrorCode.topic_authorization_failed


def topic_error(bootstrap: str, topic: str) -> int:
    """The error Metadata v9 gives the client for a topic that does not exist (no
    auto-creation): UNKNOWN_TOPIC_OR_PARTITION when it may DESCRIBE it, else
    TOPIC_AUTHORIZATION_FAILED."""
    R = metadata.MetadataRequest[9]
    req = R(topics=[R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    with open_socket(bootstrap) as s:
        return call(s, req).topics[0].error_code


def becomes(bootstrap: str, topic: str, code: int) -> int:
    return eventually(lambda: topic_error(bootstrap, topic), lambda e: e == code,
                      timeout=WAIT_S)


def acl_znodes(z: Zk) -> dict[str, bytes]:
    """Every resource znode under /kafka-acl and /kafka-acl-extended: path -> data."""
    out: dict[str, bytes] = {}

    def walk(path: str, depth: int) -> None:
        for child in z.client.get_children(path):
            if depth == 0:
                out[f"{path}/{child}"] = z.client.get(f"{path}/{child}")[0]
            else:
                walk(f"{path}/{child}", depth - 1)
    walk(znodes.ACL_LITERAL, 1)
    walk(znodes.ACL_EXTENDED, 2)
    return out


def notifications(z: Zk) -> dict[str, list[bytes]]:
    """The data of each changes znode's notifications (sorted: Kafka announces the resources
    of one request in its map's order)."""
    return {p: sorted(z.client.get(f"{p}/{n}")[0] for n in z.client.get_children(p))
            for p in (znodes.ACL_LITERAL_CHANGES, znodes.ACL_EXTENDED_CHANGES)}


def scenario(connect_: str, bootstraps: dict[int, str]) -> list:
    """Create at the first broker, enforced and listed by the others, delete at the first:
    what each step wrote to ZooKeeper and what the brokers answer."""
    ids = sorted(bootstraps)
    first, others, last = bootstraps[ids[0]], [bootstraps[i] for i in ids[1:]], \
        bootstraps[ids[-1]]
    z = Zk(connect_)
    try:
        out: list = [[topic_error(b, t) for b in bootstraps.values()
                      for t in ("secret", "pre-x")]]
        out.append(create(first, DENY_SECRET, ALLOW_SECRET, DENY_PREFIX))
        out.append(acl_znodes(z))
        out.append(notifications(z))
        out.append([becomes(b, t, REFUSED) for b in others for t in ("secret", "pre-x")])
        out.append([topic_error(b, t) for b in bootstraps.values() for t in ("other", "pre")])
        out.append(eventually(lambda: describe(last), lambda d: len(d[2]) == 3,
                              timeout=WAIT_S))
        out.append(delete(first, (TOPIC, "secret", LITERAL, ANON, None, ANY, DENY)))
        out.append(acl_znodes(z))
        out.append(notifications(z))
        out.append([becomes(b, "secret", ALLOWED) for b in others])
        out.append(delete(first, (TOPIC, None, ANY, None, None, ANY, ANY)))
        out.append(acl_znodes(z))
        out.append([becomes(b, "pre-x", ALLOWED) for b in others])
        out.append(eventually(lambda: describe(last), lambda d: d[2] == [], timeout=WAIT_S))
        return out
    finally:
        z.close()


UNSEEN = "/kafka-acl/Group/unseen"


def unseen_scenario(connect_: str, bootstraps: dict[int, str]) -> list:
    """A binding in ZooKeeper that no notification announced (its writer died before): the
    caches do not list it and a DeleteAcls filter for any group does not find it, one naming
    its resource exactly deletes it from the znode (Kafka's deleteAcls reads such a
    resource)."""
    other = bootstraps[max(bootstraps)]
    z = Zk(connect_)
    try:
        z.client.create(UNSEEN, znodes.encode_acls([znodes.AclEntry(ANON, "Deny", "*", "Read")]))
        out: list = [describe(other)]
        out.append(delete(other, (GROUP, None, ANY, None, None, ANY, ANY)))
        out.append(z.client.exists(UNSEEN) is not None)
        out.append(delete(other, (GROUP, "unseen", LITERAL, None, None, ANY, ANY)))
        out.append(z.client.exists(UNSEEN) is None)
        out.append(notifications(z))
        return out
    finally:
        z.close()


def test_acls_created_at_one_broker_are_enforced_by_every_broker(brokers, zk):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS)))
    registered(zk(), (1, 2, 3))
    out = scenario(procs[1].settings["zookeeper.connect"],
                   {i: b.bootstrap for i, b in procs.items()})
    assert out[0] == [ALLOWED] * 6
    assert [code for code, _ in out[1]] == [ErrorCode.none] * 3
    assert set(out[2]) == {"/kafka-acl/Topic/secret", "/kafka-acl-extended/prefixed/Topic/pre-"}
    assert [len(n) for n in out[3].values()] == [1, 1]  # one notification per resource
    assert out[4] == [REFUSED] * 4
    assert out[5] == [ALLOWED] * 6
    assert out[6][2] == sorted([DENY_SECRET, ALLOW_SECRET, DENY_PREFIX])
    assert out[8].keys() == out[2].keys()  # the ALLOW is left: a DENY no more
    assert out[10] == [ALLOWED] * 2
    assert out[12] == {}  # no entry left: the znodes are gone
    assert out[13] == [ALLOWED] * 2
    unseen = unseen_scenario(procs[1].settings["zookeeper.connect"],
                             {i: b.bootstrap for i, b in procs.items()})
    assert unseen[0][2] == [] and unseen[1] == [(ErrorCode.none, None, [])] and unseen[2]
    assert unseen[3] == [(ErrorCode.none, None, [(GROUP, "unseen", LITERAL, ANON, "*", READ,
                                                  DENY)])] and unseen[4]


def test_a_restarted_broker_enforces_what_zookeeper_holds(brokers, zk):
    procs = dict(zip((1, 2), brokers(1, 2, **SETTINGS)))
    registered(zk(), (1, 2))
    assert [c for c, _ in create(procs[1].bootstrap, DENY_SECRET, DENY_PREFIX)] == [0, 0]
    becomes(procs[2].bootstrap, "secret", REFUSED)
    procs[2].stop()
    # changed while broker 2 is down: it must read ZooKeeper, not its own state, at start
    assert delete(procs[1].bootstrap, (TOPIC, "secret", LITERAL, None, None, ANY, ANY))[0][0] \
        == ErrorCode.none
    procs[2].start()
    assert topic_error(procs[2].bootstrap, "secret") == ALLOWED
    assert topic_error(procs[2].bootstrap, "pre-x") == REFUSED
    assert describe(procs[2].bootstrap)[2] == [DENY_PREFIX]


async def test_acl_notifications_are_followed_and_purged_after_15_minutes(zookeeper):
    client = ZkClient(zkh.chroot_connect(zookeeper), 6000)
    await client.start()
    clock = FakeClock(wall_start_ms=int(time.time() * 1000))
    writer, reader = Authorizer(None), Authorizer(None)
    try:
        acls = ZkAcls(writer, client, clock)
        await acls.start()  # the paths, the ZooKeeper store; following starts in the background
        await acls.stop()
        follower = AclChanges(znodes.ACL_EXTENDED_CHANGES, reader, client, clock)
        prefixed = AclBinding.of(*DENY_PREFIX)
        assert await writer.create([prefixed]) == [(ErrorCode.none, "")]
        assert await writer.create([prefixed]) == [(ErrorCode.none, "")]  # no change: no news
        assert (await writer.delete([AclFilter.of(ANY, None, ANY, None, None, ANY, ANY)])
                )[0][2] == [prefixed]
        assert await writer.create([prefixed]) == [(ErrorCode.none, "")]
        await follower.refresh()
        assert list(reader.acls) == [prefixed] and follower.last_seq == 2
        assert len(await client.children(znodes.ACL_EXTENDED_CHANGES)) == 3
        # kept while younger than 15 minutes on the broker's clock, then deleted
        for step_ms, left in ((CHANGE_EXPIRATION_MS - 60_000, 3), (120_000, 0)):
            clock.step_wall(step_ms)
            await follower.refresh()
            assert len(await client.children(znodes.ACL_EXTENDED_CHANGES)) == left
        assert list(reader.acls) == [prefixed]  # purging forgets nothing
    finally:
        await client.close()



async def test_concurrent_writers_of_one_resource_lose_no_entry(zookeeper):
    """Two brokers' stores adding to and removing from the same znode at once: each write is
    conditional on the version it read, so a conflict reads again and nothing is lost."""
    connect_ = zkh.chroot_connect(zookeeper)
    clients = [ZkClient(connect_, 6000) for _ in range(2)]
    for c in clients:
        await c.start()
    clock = FakeClock()
    auths = [Authorizer(None), Authorizer(None)]
    try:
        for auth, c in zip(auths, clients):
            acls = ZkAcls(auth, c, clock)
            await acls.start()
            await acls.stop()
        entry = [AclBinding.of(TOPIC, "shared", LITERAL, f"User:u{i}", "*", DESCRIBE, ALLOW)
                 for i in range(8)]
        results = await asyncio.gather(*(auths[i % 2].create([b]) for i, b in enumerate(entry)))
        assert results == [[(ErrorCode.none, "")]] * 8
        stored = znodes.decode_acls((await clients[0].get("/kafka-acl/Topic/shared"))[0])
        assert sorted(e.principal for e in stored) == sorted(b.principal for b in entry)
        filters = [AclFilter.of(TOPIC, "shared", LITERAL, b.principal, None, ANY, ANY)
                   for b in entry]
        await asyncio.gather(*(auths[i % 2].delete([f]) for i, f in enumerate(filters)))
        assert await clients[0].exists("/kafka-acl/Topic/shared") is None
    finally:
        for c in clients:
            await c.close()
