# The handler registry. The ApiVersions answer is derived from it, so the advertised
# versions can never drift from what is implemented.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

HandlerFn = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Handler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    fn: HandlerFn
    # Versions below this are advertised but not decoded: answered by `legacy` with
    # UNSUPPORTED_VERSION (Produce v0-2, kept advertised for librdkafka, KAFKA-18659).
    decodable_from: int
    legacy: Callable[[bytes, int, int], bytes] | None = None


HANDLERS: dict[int, Handler] = {}


def api(api_key: int, name: str, versions: tuple[int, int], *,
        decodable_from: int | None = None,
        legacy: Callable[[bytes, int, int], bytes] | None = None):
    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in HANDLERS:
            raise RuntimeError(f"API key {api_key} registered twice")
        lo, hi = versions
        HANDLERS[api_key] = Handler(api_key, name, lo, hi, fn,
                                    lo if decodable_from is None else decodable_from, legacy)
        return fn
    return register


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every registered handler, by key."""
    return [(h.api_key, h.min_version, h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)]
