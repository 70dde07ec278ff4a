# Broker.tick, the housekeeping policy, on the fake clock: time-based flushes at each tick,
# retention only every log.retention.check.interval.ms, idle fetch sessions dropped.
from __future__ import annotations

import time

from kafkalite.broker.broker import Broker
from kafkalite.broker.fetch_sessions import EVICTION_MS
from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.wire.records import validate_produce_batch

from tests.helpers.kbatch import simple_batch

CHECK_MS = 5000


def _broker(tmp_path) -> tuple[Broker, FakeClock]:
    # The log layer stamps flushes with the real wall clock: start the fake one there.
    clock = FakeClock(start_ms=0, wall_start_ms=int(time.time() * 1000))
    config = BrokerConfig({"log.dirs": str(tmp_path),
                           "log.retention.check.interval.ms": str(CHECK_MS)})
    broker = Broker(config, clock)
    broker.open()
    return broker, clock


def _tick_after(broker: Broker, clock: FakeClock, ms: int) -> None:
    clock.advance(ms)
    broker.tick(clock.monotonic_ms())


def test_tick_flushes_by_time_and_applies_retention_on_its_interval(tmp_path) -> None:
    broker, clock = _broker(tmp_path)
    try:
        topic = broker.create_topic("t", 1, {"flush.ms": "1000", "retention.ms": "60000"})
        p = topic.partitions[0]
        old = clock.wall_ms() - 3_600_000
        for i in range(3):  # three closed segments of hour-old records, then a fresh one
            batch = simple_batch(2, ts=old + i)
            p.append(batch, validate_produce_batch(batch, 1 << 20))
            p.roll()
        batch = simple_batch(1)
        p.append(batch, validate_produce_batch(batch, 1 << 20))
        assert p.unflushed_messages > 0 and p.log_start_offset == 0

        _tick_after(broker, clock, 500)
        assert p.unflushed_messages > 0  # flush.ms not reached
        _tick_after(broker, clock, 1000)
        assert p.unflushed_messages == 0
        assert p.log_start_offset == 0  # retention waits for its check interval
        _tick_after(broker, clock, CHECK_MS - 1500 - 1)
        assert p.log_start_offset == 0
        _tick_after(broker, clock, 1)
        assert p.log_start_offset == 6
    finally:
        broker.close()


def test_tick_drops_idle_fetch_sessions(tmp_path) -> None:
    broker, clock = _broker(tmp_path)
    try:
        sessions = broker.fetch_sessions
        quiet, busy = sessions.new(), sessions.new()
        _tick_after(broker, clock, EVICTION_MS // 2)
        sessions.get(busy.id, busy.epoch)
        _tick_after(broker, clock, EVICTION_MS // 2 + 1)
        assert set(sessions.sessions) == {busy.id}
        _tick_after(broker, clock, EVICTION_MS // 2)
        assert not sessions.sessions
    finally:
        broker.close()
