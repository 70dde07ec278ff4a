# The fetch-session cache on the fake clock: sessions idle for Kafka's eviction time are
# dropped, and a full cache follows Kafka's FetchSessionCache rules (a stale session goes
# first, then a smaller old one for a larger newcomer; otherwise the newcomer gets no
# session and fetches without one).
from __future__ import annotations

import pytest

from kafkalite.broker.fetch_sessions import EVICTION_MS, FetchSessionCache, SessionPartition
from kafkalite.clock import FakeClock
from kafkalite.wire.errors import ErrorCode, KafkaError


def _open(cache: FetchSessionCache, partitions: int = 1):
    s = cache.new(partitions)
    for i in range(partitions):
        s.partitions[("t", i)] = SessionPartition(0, 1024)
    return s


def _use(cache: FetchSessionCache, s) -> None:
    cache.get(s.id, s.epoch)
    s.epoch += 1


def _gone(cache: FetchSessionCache, s) -> bool:
    with pytest.raises(KafkaError) as e:
        cache.get(s.id, s.epoch)
    return e.value.code == ErrorCode.fetch_session_id_not_found


def test_sessions_idle_for_the_eviction_time_are_dropped() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock)
    quiet, busy = _open(cache), _open(cache)
    clock.advance(EVICTION_MS // 2)
    _use(cache, busy)
    clock.advance(EVICTION_MS // 2)
    assert cache.evict_idle(clock.monotonic_ms()) == 0  # exactly the eviction time: kept
    clock.advance(1)
    assert cache.evict_idle(clock.monotonic_ms()) == 1
    assert _gone(cache, quiet)
    _use(cache, busy)  # used half the eviction time ago: still there
    clock.advance(EVICTION_MS + 1)
    assert cache.evict_idle(clock.monotonic_ms()) == 1
    assert _gone(cache, busy) and not cache.sessions


def test_full_cache_refuses_a_newcomer_while_every_session_is_in_use() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock, max_sessions=2)
    a, b = _open(cache), _open(cache)
    refused = cache.new(5)
    assert refused.id == 0  # answered sessionless: the client keeps doing full fetches
    assert set(cache.sessions) == {a.id, b.id}


def test_full_cache_evicts_the_stale_session_first() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock, max_sessions=2)
    a, b = _open(cache, 10), _open(cache, 1)
    clock.advance(EVICTION_MS)
    _use(cache, b)
    clock.advance(1)  # a: unused for longer than the eviction time
    c = cache.new(1)
    assert c.id != 0 and _gone(cache, a)
    assert set(cache.sessions) == {b.id, c.id}


def test_larger_newcomer_evicts_the_smallest_old_session() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock, max_sessions=2)
    small, large = _open(cache, 2), _open(cache, 8)
    clock.advance(EVICTION_MS + 1)
    _use(cache, small)
    _use(cache, large)  # both in use, both created longer ago than the eviction time
    assert cache.new(2).id == 0  # not larger than the smallest: refused
    newcomer = cache.new(3)
    assert newcomer.id != 0 and _gone(cache, small)
    assert set(cache.sessions) == {large.id, newcomer.id}


def test_young_sessions_are_not_evicted_for_a_larger_newcomer() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock, max_sessions=1)
    _open(cache, 1)
    clock.advance(EVICTION_MS)  # created and last used exactly the eviction time ago
    assert cache.new(100).id == 0
