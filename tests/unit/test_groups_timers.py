# The group coordinator's timers on a fake clock, driven directly (no sockets), after kfake's
# group timer tests: each member expires at its own session deadline and not a millisecond
# before, activity restarts the deadline, a step of the wall clock expires nobody, and the
# initial rebalance delay, the rebalance timeout, the sync timeout and the forgetting of
# MEMBER_ID_REQUIRED ids all fire when the fake clock reaches them. The coordinator writes to
# a real offsets log in a temporary directory, as the broker builds it.
# Also: the coordinator's modules import one another in one direction only.
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator.groups import CommittedOffset, GroupState as S
from kafkalite.coordinator.groups_coordinator import GroupCoordinator
from kafkalite.log.manager import LogManager

SESSION = 6000
REBALANCE = 20000
HOUR = 3_600_000
PROTOCOLS = [("range", b"")]


class Harness:
    def __init__(self, tmp_path: Path, **settings: str):
        self.clock = FakeClock()
        self.config = BrokerConfig({"log.dirs": str(tmp_path / "data"),
                                    "offsets.topic.num.partitions": "1",
                                    "group.initial.rebalance.delay.ms": "0", **settings})
        self.logs = LogManager(self.config)
        self.logs.open()
        self.coord = GroupCoordinator(self.config, self.logs, self.logs.create_topic,
                                      clock=self.clock)
        self.coord.open()

    def close(self) -> None:
        self.coord.close()
        self.logs.close()

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def join(self, group: str, member_id: str = "", *, instance: str | None = None,
             known_id: bool = False, session: int = SESSION, rebalance: int = REBALANCE,
             client: str = "c"):
        return self.coord.join_group(group, member_id, instance, known_id, False, client,
                                     "/127.0.0.1", rebalance, session, "consumer", PROTOCOLS,
                                     None)

    def sync(self, group: str, r, assignments: dict[str, bytes] | None = None):
        return self.coord.sync_group(group, r.generation, r.member_id, None, None, None,
                                     assignments or {})

    def heartbeat(self, group: str, r, instance: str | None = None) -> E:
        return self.coord.heartbeat(group, r.member_id, instance, r.generation)

    def stable(self, group: str, n: int, **kw) -> list:
        """A Stable group of n members (joined and synced now); their join results."""
        instances = kw.pop("instances", [None] * n)
        futs = [self.join(group, instance=i, **kw) for i in instances]
        self.advance(0)  # the initial rebalance delay (0 here) ends the join phase
        results = [f.result() for f in futs]
        assert {r.error for r in results} == {E.none}
        leader = next(r for r in results if r.members)
        syncs = [self.sync(group, r, {m[0]: b"a" for m in leader.members} if r is leader
                           else None) for r in results]
        assert {s.result().error for s in syncs} == {E.none}
        assert self.coord.groups[group].state == S.STABLE
        return results

    def members(self, group: str) -> set[str]:
        return set(self.coord.groups[group].members)


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


async def test_a_silent_member_is_removed_exactly_at_its_session_deadline(h):
    (r,) = h.stable("g", 1)
    h.advance(SESSION - 1)
    assert h.members("g") == {r.member_id}
    h.advance(1)
    group = h.coord.groups["g"]
    assert not group.members and group.state == S.EMPTY
    assert group.generation == r.generation + 1
    assert h.heartbeat("g", r) == E.unknown_member_id
    assert h.coord.delete_groups(["g"]) == {"g": E.none}


async def test_each_member_has_its_own_deadline_and_a_heartbeat_restarts_it(h):
    a, b = h.stable("g", 2)
    h.advance(4000)
    assert h.heartbeat("g", a) == E.none  # a's deadline is now 4000 + SESSION
    h.advance(SESSION - 4000 - 1)
    assert h.members("g") == {a.member_id, b.member_id}
    h.advance(1)  # b's deadline: b alone is removed, and the group rebalances
    assert h.members("g") == {a.member_id}
    assert h.coord.groups["g"].state == S.PREPARING_REBALANCE
    assert h.heartbeat("g", a) == E.rebalance_in_progress
    rejoin = h.join("g", a.member_id)  # a rejoins: the join phase completes without b
    assert rejoin.done() and rejoin.result().generation == a.generation + 1
    h.advance(SESSION - 1)
    assert h.members("g") == {a.member_id}
    h.advance(1)
    assert h.members("g") == set()


async def test_an_offset_commit_counts_as_a_heartbeat(h):
    (r,) = h.stable("g", 1)
    h.advance(SESSION - 1)
    committed = h.coord.commit_offsets(
        "g", r.member_id, None, r.generation,
        {("t", 0): _offset(h.clock.wall_ms(), 5)})
    assert committed == {("t", 0): E.none}
    h.advance(SESSION - 1)
    assert h.members("g") == {r.member_id}
    h.advance(1)
    assert h.members("g") == set()


async def test_a_wall_clock_step_expires_nobody(h):
    a, b = h.stable("g", 2)
    for step in (HOUR, -2 * HOUR, 30 * 24 * HOUR):
        h.clock.step_wall(step)
        h.coord.tick(h.clock.wall_ms())  # the broker's housekeeping, at the stepped time
        h.advance(SESSION // 2)
        assert h.heartbeat("g", a) == E.none and h.heartbeat("g", b) == E.none
        assert h.members("g") == {a.member_id, b.member_id}
        assert h.coord.groups["g"].state == S.STABLE
    # What Kafka stores as a time of day follows the wall clock.
    h.advance(SESSION)
    group = h.coord.groups["g"]
    assert group.state == S.EMPTY and group.state_ms == h.clock.wall_ms()


async def test_initial_rebalance_delay_waits_for_more_members_on_the_fake_clock(tmp_path):
    h = Harness(tmp_path, **{"group.initial.rebalance.delay.ms": "3000"})
    try:
        # Kafka's InitialDelayedJoin: 3000 ms, extended by 3000 ms while members arrive.
        first = h.join("g", rebalance=10000)
        h.advance(1000)
        second = h.join("g", rebalance=10000)
        h.advance(1500)
        third = h.join("g", rebalance=10000)
        h.advance(6000 - 2500 - 1)
        assert not any(f.done() for f in (first, second, third))
        h.advance(1)
        results = [f.result() for f in (first, second, third)]
        assert {(r.error, r.generation) for r in results} == {(E.none, 1)}
        assert sorted(len(r.members) for r in results) == [0, 0, 3]

        # Members that keep arriving cannot hold the join phase beyond the rebalance timeout.
        late = [h.join("other", rebalance=10000, client="m0")]
        for i in range(1, 5):
            h.advance(2000)
            late.append(h.join("other", rebalance=10000, client=f"m{i}"))
        h.advance(2000 - 1)
        assert not any(f.done() for f in late)
        h.advance(1)  # 10000 ms after the first join
        assert {(f.result().error, f.result().generation) for f in late} == {(E.none, 1)}
    finally:
        h.close()


async def test_the_rebalance_timeout_drops_members_that_do_not_rejoin(h):
    a, b = h.stable("g", 2, rebalance=5000, session=30000)
    leader = a if a.members else b
    follower = b if leader is a else a
    rejoin = h.join("g", leader.member_id, rebalance=5000, session=30000)  # forces a rebalance
    h.advance(2000)
    assert h.heartbeat("g", follower) == E.rebalance_in_progress  # ...but it never rejoins
    h.advance(3000 - 1)
    assert not rejoin.done()
    h.advance(1)
    r = rejoin.result()
    assert r.error == E.none and r.generation == leader.generation + 1
    assert h.members("g") == {leader.member_id}


async def test_a_member_waiting_in_a_rebalance_is_not_expired_until_answered(h):
    a, b = h.stable("g", 2, rebalance=REBALANCE, session=SESSION)
    leader = a if a.members else b
    follower = b if leader is a else a
    rejoin = h.join("g", leader.member_id)
    h.advance(SESSION)  # both deadlines pass: the follower is removed, the leader waits
    r = rejoin.result()
    assert r.error == E.none and h.members("g") == {leader.member_id}
    # The join answer restarted the leader's session; it owes heartbeats again.
    h.advance(SESSION - 1)
    assert h.members("g") == {leader.member_id}
    h.advance(1)
    assert h.members("g") == set()


async def test_a_sync_that_never_comes_drops_the_member(h):
    futs = [h.join("g", rebalance=5000, session=30000) for _ in range(2)]
    h.advance(0)
    results = [f.result() for f in futs]
    leader = next(r for r in results if r.members)
    follower = next(r for r in results if r is not leader)
    leader_sync = h.sync("g", leader, {leader.member_id: b"x", follower.member_id: b"y"})
    assert leader_sync.result().error == E.none
    h.advance(5000 - 1)
    assert h.members("g") == {leader.member_id, follower.member_id}
    h.advance(1)
    assert h.members("g") == {leader.member_id}
    assert h.coord.groups["g"].state == S.PREPARING_REBALANCE


async def test_a_member_id_handed_out_is_forgotten_at_its_session_timeout(h):
    (a,) = h.stable("g", 1, session=30000)
    pending = h.join("g", known_id=True, session=SESSION)
    assert pending.result().error == E.member_id_required
    rejoin = h.join("g", a.member_id, session=30000)  # the join phase waits for the new id
    h.advance(SESSION - 1)
    assert not rejoin.done() and h.coord.groups["g"].pending_members
    h.advance(1)
    assert not h.coord.groups["g"].pending_members
    assert rejoin.result().generation == a.generation + 1
    late = h.join("g", pending.result().member_id, known_id=True, session=SESSION)
    assert late.result().error == E.unknown_member_id


async def test_static_members_expire_on_their_own_deadlines(h):
    # The case: static members closed without LeaveGroup; they stop heartbeating
    # at 0, 1000 and 2000 ms.
    s0, s1, s2 = h.stable("g", 3, instances=["i0", "i1", "i2"])
    h.advance(1000)
    assert h.heartbeat("g", s1, "i1") == E.none and h.heartbeat("g", s2, "i2") == E.none
    h.advance(1000)
    assert h.heartbeat("g", s2, "i2") == E.none
    h.advance(SESSION - 2000 - 1)
    assert len(h.members("g")) == 3
    h.advance(1)
    assert h.members("g") == {s1.member_id, s2.member_id}
    assert h.coord.delete_groups(["g"]) == {"g": E.non_empty_group}
    h.advance(999)
    assert len(h.members("g")) == 2
    h.advance(1)
    assert h.members("g") == {s2.member_id}
    h.advance(999)
    assert h.members("g") == {s2.member_id}
    h.advance(1)
    group = h.coord.groups["g"]
    assert not group.members and not group.static_members and group.state == S.EMPTY
    assert h.coord.delete_groups(["g"]) == {"g": E.none}


async def test_close_stops_every_timer(h):
    h.stable("g", 2)
    h.join("g", known_id=True)
    h.join("other")
    assert h.clock.pending() > 0
    h.coord.close()
    assert h.clock.pending() == 0


def test_coordinator_modules_import_one_way():
    """No module of kafkalite/coordinator imports the coordinator module, and the modules'
    imports (those under TYPE_CHECKING included) form no cycle."""
    pkg = Path(__file__).resolve().parents[2] / "kafkalite" / "coordinator"
    graph: dict[str, set[str]] = {}
    for path in pkg.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.add(node.module or "")
        graph[path.stem] = deps & {p.stem for p in pkg.glob("*.py")}
    assert [m for m, deps in graph.items() if "groups_coordinator" in deps] == []
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join(path + (module,))}"
        if module not in done:
            for dep in graph[module]:
                visit(dep, path + (module,))
            done.add(module)
    for module in graph:
        visit(module, ())


def _offset(now: int, n: int) -> CommittedOffset:
    return CommittedOffset(n, -1, "", now, -1)
