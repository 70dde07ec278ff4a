# What a KIP-848 member subscribes to: topic names, or a regular expression in RE2 syntax, as
# Kafka (RE2/J) reads SubscribedTopicRegex: google-re2, so that what Kafka rejects
# (backreferences, look-around) is rejected here too (INVALID_REGULAR_EXPRESSION) and
# RE2-only syntax (`\pL`) is accepted. A regex matches a topic name in full; internal topics
# never match.
from __future__ import annotations

from functools import lru_cache
from typing import Mapping

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


def subscribed_topics(names: tuple[str, ...], regex: str | None,
                      topics: Mapping[str, tuple[int, bool]]) -> frozenset[str]:
    """The existing topics of a subscription (`topics`: name -> (partitions, internal))."""
    out = {n for n in names if n in topics}
    if regex:
        pattern = compile_regex(regex)
        out.update(n for n, (_, internal) in topics.items()
                   if not internal and pattern.fullmatch(n))
    return frozenset(out)
