# The classic rebalance protocol step by step, as raw requests (the client modules check it end
# to end). From Apache Kafka 3.8.0's GroupCoordinator:
# - A member joining a Stable group moves it to PreparingRebalance; the existing member's
#   Heartbeat then answers REBALANCE_IN_PROGRESS (27) until it rejoins; the join completes for
#   both with the next generation, the leader alone receiving the member list; a follower's
#   SyncGroup waits for the leader's and gets its own assignment.
# - Static membership (KIP-345, JoinGroup v5+): a member with a group.instance.id joins without
#   the MEMBER_ID_REQUIRED round; when the same instance id joins again, the old member id is
#   fenced: its Heartbeat and OffsetCommit answer FENCED_INSTANCE_ID (82)
#   (GroupCoordinator.validateCurrentMember / GroupMetadata.isStaticMemberFenced).
from __future__ import annotations

import pytest

from compat_tests.clients_common import wait_for
from compat_tests.conftest import unique
from compat_tests.protocol_cases import Ctx
from compat_tests.protocol_cases_groups import (MEMBER_ID_REQUIRED, assignment, find_coordinator,
                                                subscription)

REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID = 27, 82


@pytest.fixture(scope="module")
def ctx(target):
    return Ctx(target)


def join_fields(group: str, topic: str, member: str = "", instance: str | None = None) -> dict:
    return {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
            "member_id": member, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription([topic])}], "reason": None}


def join(conn, v: int, group: str, topic: str, member: str = "", instance: str | None = None):
    r = conn.call(11, v, join_fields(group, topic, member, instance))
    if r.error_code == MEMBER_ID_REQUIRED:
        r = conn.call(11, v, join_fields(group, topic, r.member_id, instance))
    return r


def sync(conn, v: int, group: str, gen: int, member: str, assignments: list,
         instance: str | None = None):
    return conn.call(14, v, {"group_id": group, "generation_id": gen, "member_id": member,
                             "group_instance_id": instance, "protocol_type": "consumer",
                             "protocol_name": "range", "assignments": assignments})


def heartbeat(target, group: str, gen: int, member: str, instance: str | None = None) -> int:
    return target.call(12, {"group_id": group, "generation_id": gen, "member_id": member,
                            "group_instance_id": instance}).error_code


def test_second_member_triggers_rebalance(ctx, target):
    group, topic = unique("rebalance"), ctx.data_topic
    find_coordinator(ctx, group)
    jv, sv = target.version(11), target.version(14)
    if jv < 4:
        pytest.skip("the step-by-step join below uses JoinGroup v4+ (KIP-394)")
    with target.conn() as c1, target.conn() as c2:
        j1 = join(c1, jv, group, topic)
        assert j1.error_code == 0 and j1.leader == j1.member_id, j1
        mine = assignment(topic, [0])
        assert sync(c1, sv, group, j1.generation_id, j1.member_id,
                    [{"member_id": j1.member_id, "assignment": mine}]).error_code == 0
        assert heartbeat(target, group, j1.generation_id, j1.member_id) == 0
        # The second member's join is answered only when the rebalance completes.
        first = c2.call(11, jv, join_fields(group, topic))
        assert first.error_code == MEMBER_ID_REQUIRED, first
        m2 = first.member_id
        c2.send(11, jv, join_fields(group, topic, m2))
        # The join travels on another connection: poll (bounded) until the group has seen it.
        wait_for("REBALANCE_IN_PROGRESS for the first member", lambda: heartbeat(
            target, group, j1.generation_id, j1.member_id) == REBALANCE_IN_PROGRESS,
            timeout=10, step=0.05)
        r1 = join(c1, jv, group, topic, j1.member_id)  # the leader rejoins
        r2 = c2.recv()
        assert (r1.error_code, r2.error_code) == (0, 0), (r1, r2)
        assert r1.generation_id == r2.generation_id == j1.generation_id + 1
        assert r1.leader == r2.leader == j1.member_id
        assert sorted(m.member_id for m in r1.members) == sorted([j1.member_id, m2])
        assert list(r2.members) == []  # only the leader learns the members
        # The follower's sync waits for the leader's, then gets its own assignment.
        c2.send(14, sv, {"group_id": group, "generation_id": r2.generation_id, "member_id": m2,
                         "group_instance_id": None, "protocol_type": "consumer",
                         "protocol_name": "range", "assignments": []})
        theirs = assignment(topic, [])
        s1 = sync(c1, sv, group, r1.generation_id, j1.member_id,
                  [{"member_id": j1.member_id, "assignment": mine},
                   {"member_id": m2, "assignment": theirs}])
        s2 = c2.recv()
        assert (s1.error_code, bytes(s1.assignment)) == (0, mine)
        assert (s2.error_code, bytes(s2.assignment)) == (0, theirs)
        assert heartbeat(target, group, j1.generation_id, j1.member_id) == 22  # ILLEGAL_GENERATION
        assert heartbeat(target, group, r2.generation_id, m2) == 0


def test_static_member_replaced_is_fenced(ctx, target):
    jv = target.version(11)
    if jv < 5:
        pytest.skip("static membership needs JoinGroup v5+")
    group, topic, inst = unique("static"), ctx.data_topic, "compat-instance-1"
    find_coordinator(ctx, group)
    with target.conn() as c:
        old = c.call(11, jv, join_fields(group, topic, instance=inst))
        # Static members skip the MEMBER_ID_REQUIRED round (KIP-345 with KIP-394).
        assert old.error_code == 0 and old.member_id, old
        assert sync(c, target.version(14), group, old.generation_id, old.member_id,
                    [{"member_id": old.member_id, "assignment": assignment(topic, [0])}],
                    inst).error_code == 0
        new = c.call(11, jv, join_fields(group, topic, instance=inst))
        assert new.error_code == 0 and new.member_id != old.member_id, new
    assert heartbeat(target, group, old.generation_id, old.member_id, inst) == FENCED_INSTANCE_ID
    commit = target.call(8, {
        "group_id": group, "generation_id_or_member_epoch": old.generation_id,
        "member_id": old.member_id, "group_instance_id": inst, "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    assert commit.topics[0].partitions[0].error_code == FENCED_INSTANCE_ID
