# The server-side assignors of KIP-848 consumer groups, as pure functions: Kafka's
# UniformAssignor ("uniform") and RangeAssignor ("range") in behaviour, not in code.
#
# Both are sticky: a partition stays with the member that holds it in the current target
# assignment unless balance needs it elsewhere, so a membership change moves only the
# partitions it must. Both are balanced:
# - uniform: every member gets as many partitions as any other that could take them, within
#   one (with identical subscriptions: floor or ceil of partitions / members); partitions are
#   spread across topics.
# - range: per topic, the members subscribed to it (by member id) get consecutive shares,
#   the first `partitions % members` of them one more, so that co-partitioned topics line up
#   (a member keeps what it held when that fits its share).
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

Assignment = dict[str, frozenset[int]]  # topic name -> partitions


@dataclass
class MemberSpec:
    subscribed: frozenset[str]  # topic names the member is subscribed to (resolved regex too)
    current: Mapping[str, frozenset[int]] = field(default_factory=dict)  # its current target


AssignFn = Callable[[Mapping[str, MemberSpec], Mapping[str, int]], dict[str, Assignment]]


def _freeze(result: dict[str, dict[str, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps}
            for m, topics in result.items()}


def uniform(members: Mapping[str, MemberSpec], topics: Mapping[str, int]
            ) -> dict[str, Assignment]:
    """Sticky and balanced over all partitions; `topics` gives each topic's partition count."""
    held: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    taken: set[tuple[str, int]] = set()
    for m in sorted(members):
        spec = members[m]
        for t, ps in spec.current.items():
            if t in spec.subscribed and t in topics:
                for p in ps:
                    tp = (t, p)
                    if p < topics[t] and tp not in taken:
                        held[m].add(tp)
                        taken.add(tp)
    eligible: dict[tuple[str, int], list[str]] = {}
    for t in sorted(topics):
        subs = [m for m in sorted(members) if t in members[m].subscribed]
        for p in range(topics[t]):
            if subs:
                eligible[(t, p)] = subs
    # With identical subscriptions a member holding more than its fair share gives the excess
    # back before filling; the balance pass below handles the general case.
    if eligible and all(members[m].subscribed == members[next(iter(members))].subscribed
                        for m in members):
        q, r = divmod(len(eligible), len(members))
        for m in sorted(members, key=lambda m: (-len(held[m]), m)):
            cap = q + 1 if r > 0 and len(held[m]) > q else q
            r -= cap - q
            for tp in sorted(held[m])[cap:]:
                held[m].discard(tp)
                taken.discard(tp)
    for tp in sorted(eligible):
        if tp not in taken:
            m = min(eligible[tp], key=lambda m: (len(held[m]), m))
            held[m].add(tp)
            taken.add(tp)
    _balance(held, eligible)
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for m, tps in held.items():
        for t, p in tps:
            out[m].setdefault(t, set()).add(p)
    return _freeze(out)


def _balance(held: dict[str, set[tuple[str, int]]],
             eligible: Mapping[tuple[str, int], list[str]]) -> None:
    """Move single partitions from the fullest member to a member with at least two fewer
    that can take one, until none can move (bounded by the partition count)."""
    for _ in range(len(eligible) + 1):
        moved = False
        for src in sorted(held, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[src], reverse=True):
                dst = min(eligible[tp], key=lambda m: (len(held[m]), m))
                if len(held[dst]) + 1 < len(held[src]):
                    held[src].discard(tp)
                    held[dst].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def range_(members: Mapping[str, MemberSpec], topics: Mapping[str, int]
           ) -> dict[str, Assignment]:
    """Per topic, consecutive balanced shares by member id, sticky within each share size."""
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for t in sorted(topics):
        subs = sorted(m for m in members if t in members[m].subscribed)
        if not subs:
            continue
        count = topics[t]
        base, extra = divmod(count, len(subs))
        taken: set[int] = set()
        quota: dict[str, int] = {}
        for m in subs:
            mine = sorted(p for p in members[m].current.get(t, ()) if p < count)
            keep = mine[:base]
            if len(mine) > base and extra > 0:
                keep = mine[:base + 1]
                extra -= 1
            quota[m] = len(keep)
            out[m][t] = set(keep)
            taken.update(keep)
        free = iter(p for p in range(count) if p not in taken)
        for m in subs:
            want = base + (1 if quota[m] > base else 0)
            if quota[m] <= base and extra > 0:
                want, extra = base + 1, extra - 1
            while len(out[m][t]) < want:
                out[m][t].add(next(free))
    return _freeze(out)


ASSIGNORS: dict[str, AssignFn] = {"uniform": uniform, "range": range_}
# group.consumer.assignors accepts Kafka's class names as well as the short names.
CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
               "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range"}


def configured(names: list[str]) -> list[str]:
    """The assignor names group.consumer.assignors lists, in order (the first is the
    default); raises ValueError for one kafkalite does not have."""
    out = []
    for name in names:
        short = CLASS_NAMES.get(name, name)
        if short not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {name!r}")
        out.append(short)
    return out
