# The injected clock: FakeClock fires timers in deadline order and only when advanced, and
# its wall reading moves independently of the monotonic one.
from kafkalite.clock import FakeClock, SystemClock


def test_fake_clock_fires_due_timers_in_order():
    c = FakeClock(start_ms=0)
    fired = []
    c.call_later(30, fired.append, "c")
    c.call_later(10, fired.append, "a")
    c.call_later(10, fired.append, "b")
    c.advance(9)
    assert fired == []
    c.advance(1)
    assert fired == ["a", "b"]
    assert c.monotonic_ms() == 10
    c.advance(100)
    assert fired == ["a", "b", "c"]
    assert c.monotonic_ms() == 110


def test_fake_clock_timer_sees_its_own_deadline_and_can_reschedule():
    c = FakeClock(start_ms=0)
    seen = []

    def tick():
        seen.append(c.monotonic_ms())
        if len(seen) < 3:
            c.call_later(5, tick)
    c.call_later(5, tick)
    c.advance(100)
    assert seen == [5, 10, 15]


def test_cancelled_timer_does_not_fire():
    c = FakeClock()
    fired = []
    h = c.call_later(1, fired.append, 1)
    h.cancel()
    c.advance(10)
    assert fired == [] and c.pending() == 0


def test_wall_step_leaves_monotonic_alone():
    c = FakeClock(start_ms=0, wall_start_ms=1000)
    c.step_wall(-10_000)
    assert c.monotonic_ms() == 0 and c.wall_ms() == -9000
    c.advance(5)
    assert c.wall_ms() == -8995


def test_system_clock_readings_move_forward():
    c = SystemClock()
    a = c.monotonic_ms()
    assert c.monotonic_ms() >= a and c.wall_ms() > 1_600_000_000_000
