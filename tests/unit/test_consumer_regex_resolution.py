# How a KIP-848 group's subscribed regexes resolve under an authorizer, as Kafka 4.x's
# GroupMetadataManager.refreshRegularExpressions: the topics a regex matches, less those the
# member whose heartbeat resolves it may not DESCRIBE; the group shares one resolution per
# regex; new topics, or a regex not yet resolved, resolve the group's regexes again.
from __future__ import annotations

import pytest

from kafkalite.clock import FakeClock
from kafkalite.config import load_config
from kafkalite.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator, Heartbeat
from kafkalite.coordinator.groups_registry import GroupRegistry


@pytest.fixture
def env():
    cfg = load_config(sets=[])
    registry = GroupRegistry(cfg, store=None, clock=FakeClock())
    topics = {"pay-a": (2, False), "pay-b": (1, False), "other": (1, False),
              "__consumer_offsets": (50, True)}
    return ConsumerGroupCoordinator(registry, cfg, lambda: topics), topics


def may_describe(*allowed: str):
    return lambda names: {n for n in names if n in allowed}


def parts(a) -> set:
    return {(t, p) for t, ps in (a or {}).items() for p in ps}


def join(cg, member: str, regex: str, describable):
    return cg.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=30000,
                                  subscribed_regex=regex, owned={}, describable=describable))


def test_regex_resolves_only_to_topics_the_member_may_describe(env):
    cg, _ = env
    a = join(cg, "m1", "pay-.*", may_describe("pay-a", "other"))
    assert parts(a.assignment) == {("pay-a", 0), ("pay-a", 1)}
    assert cg.groups["g"].resolved == {"pay-.*": frozenset({"pay-a"})}
    assert cg.groups["g"].subscription_metadata == {"pay-a": 2}


def test_without_an_authorizer_every_matching_topic(env):
    cg, _ = env
    a = join(cg, "m1", "pay-.*", None)
    assert parts(a.assignment) == {("pay-a", 0), ("pay-a", 1), ("pay-b", 0)}


def test_a_new_topic_resolves_again_with_the_asking_members_authority(env):
    cg, topics = env
    a = join(cg, "m1", "pay-.*", may_describe("pay-a", "pay-c"))
    topics["pay-c"] = (1, False)
    topics["pay-d"] = (1, False)
    a = cg.heartbeat(Heartbeat("g", "m1", a.member_epoch, owned=a.assignment,
                               describable=may_describe("pay-a", "pay-c")))
    assert parts(a.assignment) == {("pay-a", 0), ("pay-a", 1), ("pay-c", 0)}


def test_the_group_shares_a_resolution_until_it_is_refreshed(env):
    """Kafka resolves a group's regex once, with the context of the heartbeat that asked;
    a second member subscribing to the same regex reuses it (no refresh of its own)."""
    cg, _ = env
    join(cg, "m1", "pay-.*", may_describe("pay-a"))
    join(cg, "m2", "pay-.*", may_describe("pay-a", "pay-b"))
    group = cg.groups["g"]
    assert group.resolved == {"pay-.*": frozenset({"pay-a"})}
    assert set(group.subscription_metadata) == {"pay-a"}


def test_a_new_regex_resolves_every_regex_of_the_group(env):
    cg, _ = env
    join(cg, "m1", "pay-.*", may_describe("pay-a"))
    join(cg, "m2", "oth.*", may_describe("pay-a", "pay-b", "other"))
    assert cg.groups["g"].resolved == {"pay-.*": frozenset({"pay-a", "pay-b"}),
                                       "oth.*": frozenset({"other"})}


def test_a_replayed_group_keeps_its_subscription_until_a_heartbeat_resolves(env):
    """No resolution is replayed: the regex stands for the replayed subscription metadata's
    topics it matches (never one the resolver was refused), until a member's heartbeat."""
    cg, _ = env
    a = join(cg, "m1", "pay-.*", may_describe("pay-a"))
    cg.heartbeat(Heartbeat("g", "m2", 0, rebalance_timeout_ms=30000,
                           subscribed_names=("other",), owned={}))
    group = cg.groups["g"]
    group.resolved, group.resolved_against = None, frozenset()  # as replayed at start
    cg.fence(group, "m2")  # recomputed with no member's authority
    assert group.subscription_metadata == {"pay-a": 2}
    assert group.resolved == {"pay-.*": frozenset({"pay-a"})}
    b = cg.heartbeat(Heartbeat("g", "m1", a.member_epoch, owned=a.assignment,
                               describable=may_describe("pay-a", "pay-b")))
    assert group.resolved == {"pay-.*": frozenset({"pay-a", "pay-b"})}  # resolved again
    assert parts(b.assignment) == {("pay-a", 0), ("pay-a", 1), ("pay-b", 0)}
