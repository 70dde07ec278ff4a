# Online upgrade of a classic group (consumer_group_classic.py) with the fake clock: the first
# ConsumerGroupHeartbeat converts a classic group with members (ids, generation as epoch,
# assignments kept); its classic members are told REBALANCE_IN_PROGRESS until they rejoin,
# rejoin through JoinGroup answered at once, get their partitions in SyncGroup, commit with
# their generation, and are fenced on their own session timeout. The policy can forbid it.
# Downgrade: when the last consumer-protocol member leaves (or its session expires), the group
# turns classic again with its members, their assignments and a rebalance; a classic member
# that does not SyncGroup within its rebalance timeout after its JoinGroup is fenced.
from __future__ import annotations

import struct

import pytest

from kafkalite.clock import FakeClock
from kafkalite.config import load_config
from kafkalite.coordinator.consumer_group_classic import (encode_assignment,
                                                          parse_subscription_assignment)
from kafkalite.coordinator.consumer_group_coordinator import (ConsumerGroupCoordinator,
                                                              Heartbeat, HeartbeatError)
from kafkalite.coordinator.groups import Group, GroupState, Member
from kafkalite.coordinator.groups_membership import Membership
from kafkalite.coordinator.groups_registry import GroupRegistry
from kafkalite.wire.errors import ErrorCode as E


def subscription(topics, owned=()) -> bytes:
    """ConsumerProtocolSubscription v1: topics, no user data, owned partitions."""
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">ii", -1, len(owned))
    for t, ps in owned:
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out


def make(policy="bidirectional"):
    clock = FakeClock()
    cfg = load_config(sets=[f"group.consumer.migration.policy={policy}"])
    registry = GroupRegistry(cfg, store=None, clock=clock)
    registry.membership = Membership(registry)  # the classic protocol, for the downgrade
    topics = {"t": (4, False)}
    cg = ConsumerGroupCoordinator(registry, cfg, lambda: topics)
    cg.store.sync = lambda *a, **k: None  # no offsets log here
    classic = Group("g", clock.wall_ms(), GroupState.STABLE)
    classic.generation, classic.protocol_type, classic.protocol_name = 7, "consumer", "range"
    for mid, ps in (("c1", [0, 1]), ("c2", [2, 3])):
        classic.members[mid] = Member(mid, None, "cl", "/h", 30000, 10000, "consumer",
                                      [("range", subscription(["t"]))],
                                      encode_assignment({"t": frozenset(ps)}, 1))
    registry.groups["g"] = classic
    return clock, registry, cg


def parts(raw: bytes):
    return {(t, p) for t, ps in parse_subscription_assignment(raw)[2].items() for p in ps}


def rejoin(cg, member_id: str, rebalance_ms: int = 30000, session_ms: int = 10000,
           require_known_id: bool = True):
    """A classic member's JoinGroup to the consumer group "g"."""
    return cg.classic.join(cg.groups["g"], member_id, None, require_known_id, "cl", "/h",
                           rebalance_ms, session_ms, "consumer",
                           [("range", subscription(["t"]))])


def resync(cg, member_id: str):
    """Its SyncGroup, at its current generation."""
    group = cg.groups["g"]
    return cg.classic.sync(group, member_id, None, group.members[member_id].epoch,
                           "consumer", "range")


def join_new(cg):
    return cg.heartbeat(Heartbeat("g", "n1", 0, rebalance_timeout_ms=30000,
                                  subscribed_names=("t",), owned={}))


def test_upgrade_keeps_members_and_makes_classic_members_rejoin():
    clock, registry, cg = make()
    a = join_new(cg)
    group = cg.groups["g"]
    assert registry.group_type("g") == "consumer" and registry.groups["g"].members == {}
    assert set(group.members) == {"c1", "c2", "n1"} and group.epoch == 8
    assert a.member_epoch == 8 and a.assignment == {}  # waits for the classic members
    classic = cg.classic
    for mid in ("c1", "c2"):
        assert classic.heartbeat(group, mid, None, 7) == E.rebalance_in_progress
        assert classic.heartbeat(group, mid, None, 6) == E.illegal_generation
    # Eager rejoin (nothing owned): the member keeps what the target leaves it.
    r = rejoin(cg, "c1")
    assert (r.error, r.generation, r.protocol_name, r.leader, r.members) == \
        (E.none, 8, "range", "", [])
    s = classic.sync(group, "c1", None, 8, "consumer", "range")
    assert s.error == E.none and len(parts(s.assignment)) in (1, 2)
    assert group.validate_commit("c1", 8, 2) is None
    assert group.validate_commit("c1", 7, 2) == E.illegal_generation
    assert classic.heartbeat(group, "c1", None, 8) == E.none
    rejoin(cg, "c2")
    b = cg.heartbeat(Heartbeat("g", "n1", 8, owned={}))
    assert len(b.assignment) == 1 and len(next(iter(b.assignment.values()))) >= 1
    # Classic members are fenced on their JoinGroup session timeout (10 s here).
    clock.advance(10000)
    assert set(group.members) == {"n1"}


def test_a_classic_member_leaving_is_fenced_and_unknown_ones_refused():
    _, _, cg = make()
    join_new(cg)
    group = cg.groups["g"]
    assert cg.classic.leave(group, "c2", None) == E.none
    assert "c2" not in group.members
    assert cg.classic.leave(group, "n1", None) == E.unknown_member_id  # not a classic member
    assert cg.classic.heartbeat(group, "zz", None, 8) == E.unknown_member_id


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policy_without_upgrade_refuses(policy):
    _, registry, cg = make(policy)
    with pytest.raises(HeartbeatError) as e:
        join_new(cg)
    assert e.value.code == E.group_id_not_found
    assert registry.group_type("g") == "classic"


def test_last_consumer_member_leaving_downgrades_to_a_rebalancing_classic_group():
    _, registry, cg = make()
    join_new(cg)
    group = cg.groups["g"]
    targets = {mid: dict(group.target[mid]) for mid in ("c1", "c2")}
    epoch = group.epoch
    cg.heartbeat(Heartbeat("g", "n1", -1))
    assert registry.group_type("g") == "classic" and "g" not in cg.groups
    classic = registry.groups["g"]
    assert set(classic.members) == {"c1", "c2"}
    assert classic.generation == epoch and classic.protocol_name == "range"
    assert classic.state == GroupState.PREPARING_REBALANCE
    for mid, member in classic.members.items():
        assert member.session_timeout_ms == 10000
        assert parts(member.assignment) == {("t", p) for ps in targets[mid].values()
                                            for p in ps}
    # The classic protocol serves them now: heartbeats ask them to rejoin.
    assert registry.membership.heartbeat("g", "c1", None, epoch) == E.rebalance_in_progress
    assert registry.membership.heartbeat("g", "n1", None, epoch) == E.unknown_member_id


def upgraded_and_rejoined(rebalance_ms: int):
    """An upgraded group whose classic members c1 and c2 rejoined (60 s sessions)."""
    clock, registry, cg = make()
    join_new(cg)
    for mid in ("c1", "c2"):
        rejoin(cg, mid, rebalance_ms, 60000)
    return clock, registry, cg, cg.groups["g"]


def test_downgrade_on_the_consumer_members_session_expiry():
    clock, registry, cg, _ = upgraded_and_rejoined(30000)
    for mid in ("c1", "c2"):
        resync(cg, mid)
    clock.advance(cg.session_ms)
    assert registry.group_type("g") == "classic"
    assert set(registry.groups["g"].members) == {"c1", "c2"}


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_policy_without_downgrade_keeps_the_consumer_group(policy):
    _, registry, cg = make("bidirectional")
    join_new(cg)
    cg.classic.policy = policy
    cg.heartbeat(Heartbeat("g", "n1", -1))
    assert registry.group_type("g") == "consumer"
    assert set(cg.groups["g"].members) == {"c1", "c2"}


def test_a_classic_member_not_syncing_within_its_rebalance_timeout_is_fenced():
    clock, _, cg, group = upgraded_and_rejoined(20000)
    resync(cg, "c1")
    clock.advance(19999)
    assert {"c1", "c2"} <= set(group.members)
    clock.advance(1)
    assert "c2" not in group.members and "c1" in group.members
