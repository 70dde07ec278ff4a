# The KIP-848 consumer-group state machine with the fake clock: joins, target assignments,
# revoke-before-assign reconciliation, epochs and fencing, session and rebalance timeouts,
# static members, and the errors clients react to. The assignors are in
# test_consumer_group_assignors.py.
from __future__ import annotations

import pytest

from kafkalite.clock import FakeClock
from kafkalite.config import load_config
from kafkalite.coordinator.consumer_group import MemberState
from kafkalite.coordinator.consumer_group_coordinator import (ConsumerGroupCoordinator,
                                                              Heartbeat, HeartbeatError)
from kafkalite.coordinator.groups import Member
from kafkalite.coordinator.groups_registry import GroupRegistry
from kafkalite.wire.errors import ErrorCode as E

SESSION = 45000


@pytest.fixture
def env():
    clock = FakeClock()
    cfg = load_config(sets=["group.consumer.max.size=3"])
    registry = GroupRegistry(cfg, store=None, clock=clock)
    topics = {"t": (6, False), "u": (2, False), "__consumer_offsets": (50, True)}
    return clock, registry, ConsumerGroupCoordinator(registry, cfg, lambda: topics), topics


def join(cg, member, topics=("t",), **kw):
    return cg.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=30000,
                                  subscribed_names=tuple(topics), owned={}, **kw))


def beat(cg, member, epoch, owned=None, **kw):
    return cg.heartbeat(Heartbeat("g", member, epoch, owned=owned, **kw))


def parts(a):
    return {(t, p) for t, ps in (a or {}).items() for p in ps}


def test_first_member_gets_everything_and_group_type_is_consumer(env):
    _, registry, cg, _ = env
    a = join(cg, "m1")
    assert (a.member_epoch, parts(a.assignment)) == (1, {("t", i) for i in range(6)})
    assert registry.group_type("g") == "consumer" and registry.group_type("x") is None
    assert cg.groups["g"].state() == "Stable"


def test_partition_is_revoked_before_it_is_assigned(env):
    _, _, cg, _ = env
    a1 = join(cg, "m1")
    a2 = join(cg, "m2")
    # m2 is in the new epoch but every partition it should get is still m1's.
    assert a2.member_epoch == 2 and parts(a2.assignment) == set()
    assert cg.groups["g"].members["m2"].state == MemberState.UNRELEASED_PARTITIONS
    # m1 is asked to give up three partitions and stays in its epoch until it has.
    r1 = beat(cg, "m1", 1, owned=a1.assignment)
    assert r1.member_epoch == 1 and len(parts(r1.assignment)) == 3
    m1 = cg.groups["g"].members["m1"]
    assert m1.state == MemberState.UNREVOKED_PARTITIONS
    revoked = parts(a1.assignment) - parts(r1.assignment)
    assert parts(beat(cg, "m2", 2).assignment or {}) == set()  # not released yet
    r1 = beat(cg, "m1", 1, owned=r1.assignment)  # acknowledges the revocation
    assert r1.member_epoch == 2 and m1.state == MemberState.STABLE
    a2 = beat(cg, "m2", 2)
    assert parts(a2.assignment) == revoked
    assert cg.groups["g"].state() == "Stable"


def test_session_timeout_fences_a_silent_member(env):
    clock, _, cg, _ = env
    join(cg, "m1")
    join(cg, "m2")
    for _ in range(4):  # m1 keeps heartbeating, m2 goes silent
        clock.advance(SESSION // 3)
        a = beat(cg, "m1", cg.groups["g"].members["m1"].epoch,
                 owned=cg.groups["g"].members["m1"].assigned)
    assert set(cg.groups["g"].members) == {"m1"}
    assert parts(a.assignment) == {("t", i) for i in range(6)}
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "m2", 2)
    assert e.value.code == E.unknown_member_id


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(env):
    clock, _, cg, _ = env
    a1 = join(cg, "m1")
    join(cg, "m2")
    beat(cg, "m1", 1, owned=a1.assignment)  # asked to revoke; never acknowledges
    clock.advance(30000)
    assert "m1" not in cg.groups["g"].members


def test_epochs_fencing_and_lost_response(env):
    _, _, cg, _ = env
    a1 = join(cg, "m1")
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "m1", 5)
    assert e.value.code == E.fenced_member_epoch
    join(cg, "m2")
    r = beat(cg, "m1", 1, owned=a1.assignment)
    r = beat(cg, "m1", 1, owned=r.assignment)
    assert r.member_epoch == 2
    # The previous epoch with a subset of the assignment is accepted (a lost response).
    assert beat(cg, "m1", 1, owned=r.assignment).member_epoch == 2
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "m1", 1, owned={"u": frozenset({0})})
    assert e.value.code == E.fenced_member_epoch


def test_leave_frees_partitions_and_bumps_the_group_epoch(env):
    _, _, cg, _ = env
    join(cg, "m1")
    join(cg, "m2")
    epoch = cg.groups["g"].epoch
    assert beat(cg, "m2", -1).member_epoch == -1
    assert cg.groups["g"].epoch == epoch + 1 and set(cg.groups["g"].target) == {"m1"}


def test_static_member_leaves_temporarily_and_its_instance_returns(env):
    _, _, cg, _ = env
    join(cg, "m1", instance_id="i1")
    a2 = join(cg, "m2", instance_id="i2")
    with pytest.raises(HeartbeatError) as e:
        join(cg, "m3", instance_id="i2")
    assert e.value.code == E.unreleased_instance_id
    epoch = cg.groups["g"].epoch
    beat(cg, "m2", -2, instance_id="i2")
    assert cg.groups["g"].members["m2"].epoch == -2
    back = join(cg, "m3", instance_id="i2")
    assert cg.groups["g"].epoch == epoch  # no rebalance for a returning static member
    assert "m2" not in cg.groups["g"].members
    assert parts(back.assignment) == parts(a2.assignment) | parts(
        cg.groups["g"].members["m3"].assigned)
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "m9", 3, instance_id="i2")
    assert e.value.code == E.fenced_instance_id


def test_errors_clients_react_to(env):
    _, registry, cg, _ = env
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "nobody", 3)
    assert e.value.code == E.group_id_not_found
    for m in ("m1", "m2", "m3"):
        join(cg, m)
    with pytest.raises(HeartbeatError) as e:
        join(cg, "m4")
    assert e.value.code == E.group_max_size_reached
    with pytest.raises(HeartbeatError) as e:
        join(cg, "m1", server_assignor="sticky")
    assert e.value.code == E.unsupported_assignor
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "nobody", 3)  # the group-size check comes first, as Kafka's
    assert e.value.code == E.group_max_size_reached
    cg.heartbeat(Heartbeat("g", "m3", -1))
    with pytest.raises(HeartbeatError) as e:
        beat(cg, "nobody", 3)
    assert e.value.code == E.unknown_member_id
    with pytest.raises(HeartbeatError) as e:
        cg.heartbeat(Heartbeat("g", "m5", 0, subscribed_names=("t",), owned={}))
    assert e.value.code == E.invalid_request  # no rebalance timeout on a join
    classic = registry.add_group("c")
    classic.members["x"] = Member.__new__(Member)  # a classic group with a member
    with pytest.raises(HeartbeatError) as e:
        cg.heartbeat(Heartbeat("c", "m1", 0, rebalance_timeout_ms=1, subscribed_names=("t",),
                               owned={}))
    assert e.value.code == E.group_id_not_found


def test_regex_and_topic_changes_move_the_target_without_rejoin(env):
    _, _, cg, topics = env
    a = cg.heartbeat(Heartbeat("g", "m1", 0, rebalance_timeout_ms=1000,
                               subscribed_regex="u|v", owned={}))
    assert parts(a.assignment) == {("u", 0), ("u", 1)}
    topics["v"] = (1, False)
    topics["u"] = (3, False)
    a = beat(cg, "m1", a.member_epoch, owned=a.assignment)
    assert parts(a.assignment) == {("u", 0), ("u", 1), ("u", 2), ("v", 0)}
    with pytest.raises(HeartbeatError) as e:
        cg.heartbeat(Heartbeat("g", "m2", 0, rebalance_timeout_ms=1000,
                               subscribed_regex="(", owned={}))
    assert e.value.code == E.invalid_regular_expression


@pytest.mark.parametrize("regex, valid", [
    (r"(u)\1", False),   # backreference: RE2 (and Kafka's RE2/J) has none
    (r"(?=u)u", False),  # look-ahead: likewise
    (r"u\pL*", True),    # Unicode class: RE2 syntax Python's `re` lacks
    (r"[u[:digit:]]", True),
])
def test_regex_is_re2_syntax_as_kafka(env, regex, valid):
    _, _, cg, topics = env
    hb = Heartbeat("g", "m1", 0, rebalance_timeout_ms=1000, subscribed_regex=regex, owned={})
    if valid:
        a = cg.heartbeat(hb)
        assert parts(a.assignment) == {("u", 0), ("u", 1)}
    else:
        with pytest.raises(HeartbeatError) as e:
            cg.heartbeat(hb)
        assert e.value.code == E.invalid_regular_expression
        assert "is not a valid regular expression: " in str(e.value)


def test_group_overrides_replace_the_broker_interval_and_session(env):
    """GROUP configs consumer.heartbeat.interval.ms / consumer.session.timeout.ms, read at
    each heartbeat: the next answer carries the group's interval, and the session is timed
    with the group's timeout from the next heartbeat on."""
    clock, _, cg, _ = env
    overrides: dict[str, str] = {}
    cg.overrides = lambda gid: overrides if gid == "g" else {}
    a = join(cg, "m1")
    assert a.heartbeat_interval_ms == 5000
    overrides.update({"consumer.heartbeat.interval.ms": "700",
                      "consumer.session.timeout.ms": "50000"})
    assert beat(cg, "m1", a.member_epoch).heartbeat_interval_ms == 700
    clock.advance(SESSION)
    assert "m1" in cg.groups["g"].members
    clock.advance(50000 - SESSION)
    assert cg.groups["g"].members == {}
    overrides.clear()
    a = join(cg, "m2")
    assert a.heartbeat_interval_ms == 5000
    clock.advance(SESSION)
    assert cg.groups["g"].members == {}


def test_member_that_missed_its_epoch_bump_is_fenced_until_its_session_ends(env):
    """librdkafka times a heartbeat out after heartbeat.interval.ms: when the late answer
    carried an epoch bump, its next heartbeat has the previous epoch and no owned partitions.
    As Kafka 4.x (throwIfConsumerGroupMemberEpochIsInvalid): FENCED_MEMBER_EPOCH, its rejoin
    with epoch 0 under the same member id too, and neither renews the session; its commits
    are refused; once the session ends the same id joins as a new member."""
    clock, _, cg, _ = env
    a1 = join(cg, "m1")
    join(cg, "m2")
    r = beat(cg, "m1", 1, owned=a1.assignment)
    assert beat(cg, "m1", 1, owned=r.assignment).member_epoch == 2  # this answer is lost
    group = cg.groups["g"]
    for hb in (lambda: beat(cg, "m1", 1), lambda: join(cg, "m1")):
        with pytest.raises(HeartbeatError) as e:
            hb()
        assert e.value.code == E.fenced_member_epoch
    assert group.validate_commit("m1", 1, 9) == E.stale_member_epoch
    for _ in range(3):  # m2 keeps its session; m1's fenced heartbeats do not renew its own
        clock.advance(SESSION // 2)
        beat(cg, "m2", group.members["m2"].epoch, owned=group.members["m2"].assigned)
    assert "m1" not in group.members
    assert group.validate_commit("m1", 1, 9) == E.unknown_member_id
    assert join(cg, "m1").member_epoch == group.epoch
