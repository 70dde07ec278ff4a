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
    # The handler decodes the body itself (fn(ctx, (frame, pos)) -> response body bytes,
    # tagged fields of a flexible header included): keys kio has no schema for.
    raw: bool = False
    # Served (and advertised) only by a broker in a ZooKeeper cluster, as Kafka 3.8 lists
    # ControlledShutdown in ZooKeeper mode only.
    zk_only: bool = False


HANDLERS: dict[int, Handler] = {}


def api(api_key: int, name: str, versions: tuple[int, int], *,
        decodable_from: int | None = None,
        legacy: Callable[[bytes, int, int], bytes] | None = None, raw: bool = False,
        zk_only: bool = False):
    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in HANDLERS:
            raise RuntimeError(f"API key {api_key} registered twice")
        lo, hi = versions
        HANDLERS[api_key] = Handler(api_key, name, lo, hi, fn,
                                    lo if decodable_from is None else decodable_from, legacy,
                                    raw, zk_only)
        return fn
    return register


def supported_versions(zk_mode: bool = False) -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every handler this broker serves, by key."""
    return [(h.api_key, h.min_version, h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
            if zk_mode or not h.zk_only]
