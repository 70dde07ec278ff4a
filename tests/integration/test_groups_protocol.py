# The group APIs at the protocol level, with requests that well-behaved clients never send:
# each gets the error code Apache Kafka answers, and the group's state is left intact.
# Requests are built from kio's schema classes and sent over a plain socket.
from __future__ import annotations

import datetime
import struct
import uuid

import pytest

from kafkalite.testing import BrokerProcess

from .test_groups_helpers import RawClient

def _errors():
    from kio.schema.errors import ErrorCode
    return ErrorCode


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocol Subscription v0."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join(raw: RawClient, group: str, *, version: int = 5, member: str = "",
         instance: str | None = None, ptype: str = "consumer", protocols=None,
         session: int = 10000, rebalance: int = 10000, wait: bool = True,
         follow: bool = True):
    """JoinGroup; with `follow`, a MEMBER_ID_REQUIRED answer (v4+) is followed by the join
    with the member id it hands out, as clients do. Without `wait`, the (last) request is
    only sent: its answer is read later with raw.recv()."""
    m = raw.schema(11, version)
    if protocols is None:
        protocols = [("range", subscription("t"))]
    fields = dict(group_id=group, session_timeout=_ms(session), member_id=member,
                  protocol_type=ptype,
                  protocols=tuple(m.JoinGroupRequestProtocol(name=n, metadata=b)
                                  for n, b in protocols))
    if version >= 1:
        fields["rebalance_timeout"] = _ms(rebalance)
    if version >= 5:
        fields["group_instance_id"] = instance
    if follow and version >= 4 and not member and instance is None:
        first = raw.call(11, version, **fields)
        if first.error_code != _errors().member_id_required:
            return first
        fields["member_id"] = first.member_id
    raw.send(11, version, **fields)
    return raw.recv() if wait else None


def sync(raw: RawClient, group: str, generation: int, member: str,
         assignments: dict[str, bytes] | None = None, instance: str | None = None,
         version: int = 3):
    m = raw.schema(14, version)
    fields = dict(group_id=group, generation_id=generation, member_id=member,
                  assignments=tuple(m.SyncGroupRequestAssignment(member_id=k, assignment=v)
                                    for k, v in (assignments or {}).items()))
    if version >= 3:
        fields["group_instance_id"] = instance
    return raw.call(14, version, **fields)


def heartbeat(raw: RawClient, group: str, generation: int, member: str,
              instance: str | None = None):
    return raw.call(12, 3, group_id=group, generation_id=generation, member_id=member,
                    group_instance_id=instance).error_code


def commit(raw: RawClient, group: str, generation: int, member: str,
           offsets: dict[tuple[str, int], tuple[int, str | None]], version: int = 7):
    m = raw.schema(8, version)
    topics = {}
    for (t, p), (o, meta) in offsets.items():
        topics.setdefault(t, []).append(m.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_metadata=meta))
    resp = raw.call(8, version, group_id=group, generation_id_or_member_epoch=generation,
                    member_id=member, group_instance_id=None,
                    topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                 for t, ps in topics.items()))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics
            for p in t.partitions}


def fetch(raw: RawClient, group: str) -> dict:
    resp = raw.call(9, 6, group_id=group, topics=None)
    assert resp.error_code == _errors().none
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata)
            for t in resp.topics for p in t.partitions}


def describe(raw: RawClient, group: str):
    return raw.call(15, 4, groups=(group,), include_authorized_operations=False).groups[0]


@pytest.fixture
def raw(kafka_broker):
    client = RawClient(kafka_broker)
    yield client
    client.close()


@pytest.fixture
def topic(kafka_topic):
    return kafka_topic(partitions=2)


def _stable_member(raw: RawClient, group: str, topic: str, **kw) -> tuple[str, int]:
    """A single-member Stable group; returns (member id, generation)."""
    E = _errors()
    r = join(raw, group, protocols=[("range", subscription(topic))], **kw)
    assert r.error_code == E.none and r.leader == r.member_id
    s = sync(raw, group, r.generation_id, r.member_id, {r.member_id: b"assignment-1"},
             instance=kw.get("instance"))
    assert s.error_code == E.none and s.assignment == b"assignment-1"
    return r.member_id, r.generation_id


def test_join_rejects_bad_protocols_and_session_timeouts(raw):
    E = _errors()
    group = f"bad-join-{uuid.uuid4().hex[:6]}"
    assert join(raw, group, protocols=[]).error_code == E.inconsistent_group_protocol
    assert join(raw, group, ptype="").error_code == E.inconsistent_group_protocol
    assert join(raw, group, session=100).error_code == E.invalid_session_timeout
    assert join(raw, group, session=1_800_001).error_code == E.invalid_session_timeout
    assert join(raw, "").error_code == E.invalid_group_id
    # Unknown member of an unknown group.
    assert join(raw, group, member="ghost").error_code == E.unknown_member_id
    member, gen = _stable_member(raw, group, "t")
    # Another protocol type, or no protocol in common, does not fit the existing group.
    assert join(raw, group, ptype="connect").error_code == E.inconsistent_group_protocol
    assert join(raw, group, protocols=[("sticky", b"")]).error_code \
        == E.inconsistent_group_protocol
    d = describe(raw, group)
    assert d.group_state == "Stable" and [m.member_id for m in d.members] == [member]
    assert heartbeat(raw, group, gen, member) == E.none


def test_member_id_required_only_from_join_group_v4(raw):
    E = _errors()
    group = f"kip394-{uuid.uuid4().hex[:6]}"
    r = join(raw, group, version=4, follow=False)
    assert r.error_code == E.member_id_required and r.member_id.startswith("raw-groups-")
    r2 = join(raw, group, version=4, member=r.member_id, follow=False)
    assert r2.error_code == E.none and r2.member_id == r.member_id
    assert r2.generation_id == 1 and r2.leader == r.member_id
    old = join(raw, f"{group}-v3", version=3)
    assert old.error_code == E.none and old.member_id and old.generation_id == 1
    v0 = join(raw, f"{group}-v0", version=0)
    assert v0.error_code == E.none and v0.leader == v0.member_id


def test_rebalance_hands_the_leader_all_members_and_each_its_assignment(kafka_broker):
    E = _errors()
    group = f"two-{uuid.uuid4().hex[:6]}"
    a, b = RawClient(kafka_broker, "client-a"), RawClient(kafka_broker, "client-b")
    try:
        ma, gen1 = _stable_member(a, group, "t")
        join(b, group, wait=False)  # waits for a to rejoin
        assert heartbeat(a, group, gen1, ma) == E.rebalance_in_progress
        ra = join(a, group, member=ma)
        rb = b.recv()
        assert ra.error_code == rb.error_code == E.none
        assert ra.generation_id == rb.generation_id == gen1 + 1
        assert ra.leader == rb.leader == ma and rb.members == ()
        assert sorted(m.member_id for m in ra.members) == sorted([ma, rb.member_id])
        b.send(14, 3, group_id=group, generation_id=rb.generation_id, member_id=rb.member_id,
               group_instance_id=None, assignments=())
        # The leader's assignment names a member that is not in the group: it is ignored.
        sa = sync(a, group, ra.generation_id, ma,
                  {ma: b"for-a", rb.member_id: b"for-b", "ghost": b"for-nobody"})
        sb = b.recv()
        assert (sa.error_code, sa.assignment) == (E.none, b"for-a")
        assert (sb.error_code, sb.assignment) == (E.none, b"for-b")
        d = describe(a, group)
        assert d.group_state == "Stable"
        assert sorted((m.member_id, m.member_assignment) for m in d.members) \
            == sorted([(ma, b"for-a"), (rb.member_id, b"for-b")])
        assert {m.client_id for m in d.members} == {"client-a", "client-b"}
    finally:
        a.close()
        b.close()


def test_members_that_do_not_rejoin_in_time_are_removed(kafka_broker):
    E = _errors()
    group = f"late-{uuid.uuid4().hex[:6]}"
    a, b = RawClient(kafka_broker), RawClient(kafka_broker)
    try:
        ma, gen = _stable_member(a, group, "t", rebalance=1500)
        rb = join(b, group, rebalance=1500)  # a never rejoins: dropped at the timeout
        assert rb.error_code == E.none and rb.generation_id == gen + 1
        assert rb.leader == rb.member_id and [m.member_id for m in rb.members] == [rb.member_id]
        assert heartbeat(a, group, gen, ma) == E.unknown_member_id
    finally:
        a.close()
        b.close()


def test_heartbeat_and_commit_errors_leave_the_group_intact(raw, topic):
    E = _errors()
    group = f"errs-{uuid.uuid4().hex[:6]}"
    member, gen = _stable_member(raw, group, topic)
    assert heartbeat(raw, group, gen + 1, member) == E.illegal_generation
    assert heartbeat(raw, group, gen, "ghost") == E.unknown_member_id
    assert heartbeat(raw, f"{group}-none", 1, "ghost") == E.unknown_member_id
    assert commit(raw, group, gen, member, {(topic, 0): (5, "five")}) \
        == {(topic, 0): E.none}
    assert commit(raw, group, gen - 1, member, {(topic, 0): (9, "stale")}) \
        == {(topic, 0): E.illegal_generation}
    assert commit(raw, group, gen, "ghost", {(topic, 0): (9, "ghost")}) \
        == {(topic, 0): E.unknown_member_id}
    # A simple consumer may not commit to a group that has members...
    assert commit(raw, group, -1, "", {(topic, 0): (9, "simple")}) \
        == {(topic, 0): E.unknown_member_id}
    # ...nor may anybody commit oversized metadata or to a topic that does not exist.
    assert commit(raw, group, gen, member, {(topic, 0): (9, "x" * 4097), (topic, 1): (3, None),
                                            ("no-such-topic", 0): (1, "")}) \
        == {(topic, 0): E.offset_metadata_too_large, (topic, 1): E.none,
            ("no-such-topic", 0): E.unknown_topic_or_partition}
    assert fetch(raw, group) == {(topic, 0): (5, "five"), (topic, 1): (3, "")}
    assert describe(raw, group).group_state == "Stable"
    assert heartbeat(raw, group, gen, member) == E.none

    # Once the group is empty, a simple consumer (generation -1) may commit.
    resp = raw.call(13, 0, group_id=group, member_id=member)
    assert resp.error_code == E.none
    assert describe(raw, group).group_state == "Empty"
    assert commit(raw, group, -1, "", {(topic, 0): (7, "simple")}) == {(topic, 0): E.none}
    assert commit(raw, f"{group}-fresh", 3, "m", {(topic, 0): (1, "")}) \
        == {(topic, 0): E.illegal_generation}
    assert fetch(raw, group)[(topic, 0)] == (7, "simple")
    assert raw.call(13, 0, group_id=group, member_id=member).error_code \
        == E.unknown_member_id


def test_static_membership_fences_the_replaced_member(raw, topic):
    E = _errors()
    group = f"static-raw-{uuid.uuid4().hex[:6]}"
    old, gen = _stable_member(raw, group, topic, instance="inst-1")
    r = join(raw, group, instance="inst-1", protocols=[("range", subscription(topic))])
    assert r.error_code == E.none and r.member_id != old
    assert r.generation_id == gen  # no rebalance
    assert r.leader == old  # the old leader id: a pre-v9 static leader must not reassign
    assert sync(raw, group, gen, r.member_id, instance="inst-1").assignment == b"assignment-1"
    assert heartbeat(raw, group, gen, old, "inst-1") == E.fenced_instance_id
    assert heartbeat(raw, group, gen, r.member_id, "inst-1") == E.none
    assert describe(raw, group).group_state == "Stable"
    # LeaveGroup v3+ removes a static member by its instance id alone.
    m = raw.schema(13, 3)
    resp = raw.call(13, 3, group_id=group, members=(
        m.MemberIdentity(member_id="", group_instance_id="inst-1"),
        m.MemberIdentity(member_id="", group_instance_id="inst-unknown")))
    assert resp.error_code == E.none
    assert [x.error_code for x in resp.members] == [E.none, E.unknown_member_id]
    assert describe(raw, group).group_state == "Empty"


def test_find_coordinator_list_describe_delete_and_offset_fetch_versions(raw, topic):
    E = _errors()
    group = f"misc-{uuid.uuid4().hex[:6]}"
    v0 = raw.call(10, 0, key=group)
    assert v0.error_code == E.none and v0.node_id >= 0
    assert raw.call(10, 3, key="txn", key_type=1).error_code == E.none
    assert raw.call(10, 3, key=group, key_type=5).error_code == E.invalid_request
    batched = raw.call(10, 4, key_type=0, coordinator_keys=(group, "other"))
    assert [(c.key, c.error_code) for c in batched.coordinators] \
        == [(group, E.none), ("other", E.none)]

    member, gen = _stable_member(raw, group, topic)
    commit(raw, group, gen, member, {(topic, 1): (4, "meta")})
    listed = raw.call(16, 5, states_filter=("STABLE",), types_filter=())
    assert (group, "consumer", "Stable", "classic") in {
        (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups}
    assert group not in {g.group_id for g in raw.call(16, 5, states_filter=(),
                                                         types_filter=("consumer",)).groups}
    assert group in {g.group_id for g in raw.call(16, 0).groups}
    dead = raw.call(15, 0, groups=(f"{group}-unknown",)).groups[0]
    assert (dead.error_code, dead.group_state, dead.members) == (E.none, "Dead", ())

    m8 = raw.schema(9, 8)
    r8 = raw.call(9, 8, require_stable=True, groups=(
        m8.OffsetFetchRequestGroup(group_id=group, topics=None),
        m8.OffsetFetchRequestGroup(group_id=f"{group}-unknown", topics=(
            m8.OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),))))
    assert [(g.group_id, g.error_code) for g in r8.groups] \
        == [(group, E.none), (f"{group}-unknown", E.none)]
    assert [(t.name, p.partition_index, p.committed_offset, p.metadata)
            for t in r8.groups[0].topics for p in t.partitions] == [(topic, 1, 4, "meta")]
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in r8.groups[1].topics for p in t.partitions] == [(-1, -1, "")]
    m1 = raw.schema(9, 1)
    r1 = raw.call(9, 1, group_id=group, topics=(
        m1.OffsetFetchRequestTopic(name=topic, partition_indexes=(0, 1)),))
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for t in r1.topics for p in t.partitions] == [(0, -1, "", E.none),
                                                           (1, 4, "meta", E.none)]

    deleted = raw.call(42, 2, groups_names=(group, f"{group}-unknown"))
    assert [(r.group_id, r.error_code) for r in deleted.results] \
        == [(group, E.non_empty_group), (f"{group}-unknown", E.group_id_not_found)]
    assert raw.call(13, 0, group_id=group, member_id=member).error_code == E.none
    deleted = raw.call(42, 0, groups_names=(group,))
    assert deleted.results[0].error_code == E.none
    assert fetch(raw, group) == {}
    md = raw.schema(47, 0)
    gone = raw.call(47, 0, group_id=group, topics=(md.OffsetDeleteRequestTopic(
        name=topic, partitions=(md.OffsetDeleteRequestPartition(partition_index=0),)),))
    assert gone.error_code == E.group_id_not_found


def test_group_max_size():
    E = _errors()
    with BrokerProcess(settings={"group.max.size": "2"}) as bp:
        clients = [RawClient(bp.bootstrap) for _ in range(3)]
        try:
            a, b, c = clients
            ma, gen = _stable_member(a, "capped", "t")
            join(b, "capped", wait=False)
            assert join(a, "capped", member=ma).error_code == E.none
            rb = b.recv()
            assert rb.error_code == E.none and rb.generation_id == gen + 1
            full = join(c, "capped")
            assert full.error_code == E.group_max_size_reached and full.member_id == ""
        finally:
            for x in clients:
                x.close()
