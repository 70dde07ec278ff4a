# The server-side assignors of KIP-848 groups: balanced, complete, and sticky.
from __future__ import annotations

import random

import pytest

from kafkalite.coordinator.consumer_assignors import ASSIGNORS, MemberSpec


def flat(assignment):
    return [(t, p) for a in assignment.values() for t, ps in a.items() for p in ps]


@pytest.mark.parametrize("name", ["uniform", "range"])
@pytest.mark.parametrize("members,partitions", [(1, 6), (3, 6), (4, 6), (5, 3), (7, 20)])
def test_complete_and_balanced(name, members, partitions):
    specs = {f"m{i}": MemberSpec(frozenset({"t"})) for i in range(members)}
    out = ASSIGNORS[name](specs, {"t": partitions})
    got = flat(out)
    assert sorted(got) == [("t", p) for p in range(partitions)]  # each once
    sizes = [len(a.get("t", ())) for a in out.values()]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_sticky_when_a_member_leaves_or_joins(name):
    assign = ASSIGNORS[name]
    specs = {f"m{i}": MemberSpec(frozenset({"t"})) for i in range(3)}
    first = assign(specs, {"t": 6})
    # One leaves: the others keep all they had.
    two = {m: MemberSpec(frozenset({"t"}), first[m]) for m in ("m0", "m1")}
    second = assign(two, {"t": 6})
    for m in two:
        assert first[m]["t"] <= second[m]["t"]
    # One joins: nobody gains at another's expense beyond balance; at most the moved ones.
    three = {**{m: MemberSpec(frozenset({"t"}), second[m]) for m in two},
             "m9": MemberSpec(frozenset({"t"}))}
    third = assign(three, {"t": 6})
    moved = sum(len(second[m]["t"] - third[m]["t"]) for m in two)
    assert moved == 2 and len(third["m9"]["t"]) == 2


def test_uniform_heterogeneous_subscriptions_random():
    rng = random.Random(7)
    topics = {f"t{i}": rng.randint(1, 8) for i in range(5)}
    for _ in range(30):
        specs = {f"m{i}": MemberSpec(frozenset(rng.sample(sorted(topics), rng.randint(1, 5))))
                 for i in range(rng.randint(1, 6))}
        out = ASSIGNORS["uniform"](specs, topics)
        subscribed = set().union(*(s.subscribed for s in specs.values()))
        assert sorted(flat(out)) == sorted((t, p) for t in subscribed
                                           for p in range(topics[t]))
        for m, a in out.items():
            assert set(a) <= specs[m].subscribed
