# What a KIP-848 member subscribes to: topic names, or a regular expression in RE2 syntax, as
# Kafka (RE2/J) reads SubscribedTopicRegex: google-re2, so that what Kafka rejects
# (backreferences, look-around) is rejected here too (INVALID_REGULAR_EXPRESSION) and
# RE2-only syntax (`\pL`) is accepted. A regex matches a topic name in full; internal topics
# never match. What a group's regex resolves to is filtered by the authorizer
# (consumer_group_coordinator.py): `resolved` below.
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors go back to the client, not to stderr


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> "re2._Regexp":
    """The compiled pattern; InvalidRegex with RE2's reason."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise InvalidRegex(str(reason)) from None


def matching(regex: str, names: Iterable[str]) -> set[str]:
    """The names `regex` matches in full."""
    pattern = compile_regex(regex)
    return {n for n in names if pattern.fullmatch(n)}


def subscribed_topics(names: tuple[str, ...], regex: str | None,
                      topics: Mapping[str, tuple[int, bool]],
                      resolved: Mapping[str, frozenset[str]] | None = None) -> frozenset[str]:
    """The existing topics of a subscription (`topics`: name -> (partitions, internal)); a
    regex stands for its `resolved` topics when given (a regex not resolved: none), else
    for every non-internal topic it matches."""
    out = {n for n in names if n in topics}
    if regex and resolved is not None:
        out.update(n for n in resolved.get(regex, ()) if n in topics)
    elif regex:
        out.update(matching(regex, (n for n, (_, internal) in topics.items() if not internal)))
    return frozenset(out)


def resolve_regexes(group: Any, member: Any, topics: Mapping[str, tuple[int, bool]],
                    describable: Callable[[set[str]], set[str]] | None) -> None:
    """Resolve a consumer group's regexes (ConsumerGroup.resolved), as Kafka 4.x's
    GroupMetadataManager (maybeUpdateRegularExpressions / refreshRegularExpressions) does,
    when one of them (`member`'s included) is not yet resolved or topics appeared since:
    every regex of the group at once, with the authority of the member whose heartbeat
    asks, `describable` (its DESCRIBE on each matching topic,
    filterTopicDescribeAuthorizedTopics; None: no authorizer); the other members share what
    it resolved. Kafka batches refreshes 10 s apart and runs them off its event loop; here
    they are taken at once."""
    regexes = {m.subscribed_regex for m in (*group.members.values(), member)
               if m.subscribed_regex}
    resolved = resolved_regexes(group)
    names = frozenset(n for n, (_, internal) in topics.items() if not internal)
    if regexes - resolved.keys() or not names <= group.resolved_against:
        matched = {r: matching(r, names) for r in regexes}
        wanted: set[str] = set().union(*matched.values())
        allowed = wanted if describable is None else describable(wanted)
        resolved = {r: frozenset(ts & allowed) for r, ts in matched.items()}
        group.resolved_against = names
    group.resolved = {r: ts for r, ts in resolved.items() if r in regexes}


def resolved_regexes(group: Any) -> dict[str, frozenset[str]]:
    """A group's resolved regexes. A group replayed at start has none (Kafka keeps them in
    __consumer_offsets; kafkalite does not): until a member's heartbeat resolves them again,
    each stands for the topics of the replayed subscription metadata it matches."""
    if group.resolved is None:
        group.resolved = {r: frozenset(matching(r, group.subscription_metadata))
                          for r in {m.subscribed_regex for m in group.members.values()
                                    if m.subscribed_regex}}
        group.resolved_against = frozenset()
    return group.resolved
