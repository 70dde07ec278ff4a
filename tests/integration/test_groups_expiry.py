# Time-driven behaviour of the group coordinator. Over sockets: an offset committed with an
# explicit retention (OffsetCommit v2-4) expires. In-process, against a real Broker and its
# real log (the coordinator is a sans-socket state machine on the broker's injected clock;
# a FakeClock where minutes must pass): offsets of an Empty group expire
# offsets.retention.minutes after it emptied, a Stable consumer group keeps its subscribed
# topics' offsets, a restarted coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it has
# replayed the offsets topic, and the initial rebalance delay gathers members (real time).
# Session, join and sync timers: tests/unit/test_groups_timers.py.
from __future__ import annotations

import asyncio
import datetime
import uuid

from kio.schema.errors import ErrorCode as E

from kafkalite.broker.broker import Broker
from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator.groups import CommittedOffset, GroupState
from kafkalite.testing import BrokerProcess

from .test_groups_helpers import RawClient, wait_for
from .test_groups_protocol import subscription

MINUTE = 60_000


def test_explicit_retention_time_expires_the_offset():
    with BrokerProcess(settings={"offsets.retention.check.interval.ms": "200",
                                 "num.partitions": "1"}) as bp:
        raw = RawClient(bp.bootstrap)
        try:
            raw.call(3, 4, topics=(raw.schema(3, 4).MetadataRequestTopic(name="expiring"),),
                     allow_auto_topic_creation=True)
            m = raw.schema(8, 2)
            resp = raw.call(8, 2, group_id="short-lived", generation_id_or_member_epoch=-1,
                            member_id="", retention_time=datetime.timedelta(milliseconds=300),
                            topics=(m.OffsetCommitRequestTopic(name="expiring", partitions=(
                                m.OffsetCommitRequestPartition(partition_index=0,
                                                               committed_offset=1,
                                                               committed_metadata="m"),)),))
            assert resp.topics[0].partitions[0].error_code == E.none

            def offsets():
                r = raw.call(9, 6, group_id="short-lived", topics=None)
                return [(t.name, p.committed_offset) for t in r.topics for p in t.partitions]
            assert offsets() == [("expiring", 1)]
            wait_for(lambda: offsets() == [], 30, "the offset to expire")
            listed = raw.call(16, 4, states_filter=()).groups
            assert "short-lived" not in {g.group_id for g in listed}
        finally:
            raw.close()


async def _broker(tmp_path, clock=None, **settings) -> Broker:
    cfg = BrokerConfig({"log.dirs": str(tmp_path / "data"),
                        "group.initial.rebalance.delay.ms": "0",
                        "offsets.retention.minutes": "1",
                        "offsets.retention.check.interval.ms": "1", **settings})
    b = Broker(cfg, clock=clock)
    b.open()
    return b


async def _member(coord, clock: FakeClock, group: str, topic: str, session_ms: int):
    first = await coord.join_group(group, "", None, True, False, "client", "/127.0.0.1",
                                   10000, session_ms, "consumer",
                                   [("range", subscription(topic))], None)
    assert first.error == E.member_id_required
    joined = coord.join_group(group, first.member_id, None, True, False, "client",
                              "/127.0.0.1", 10000, session_ms, "consumer",
                              [("range", subscription(topic))], None)
    clock.advance(0)  # the initial rebalance delay (0) ends the join phase
    r = await joined
    assert r.error == E.none
    s = await coord.sync_group(group, r.generation, r.member_id, None, None, None,
                               {r.member_id: b"a"})
    assert s.error == E.none
    return r.member_id, r.generation


def _offset(now: int, n: int) -> CommittedOffset:
    return CommittedOffset(n, -1, f"m{n}", now, -1)


async def test_retention_of_empty_stable_and_simple_groups(tmp_path):
    clock = FakeClock()
    b = await _broker(tmp_path, clock)
    try:
        b.create_topic("sub", 1)
        b.create_topic("other", 1)
        coord = b.groups

        def tick_at(wall_ms: int) -> None:
            clock.advance(wall_ms - clock.wall_ms())
            coord.tick(clock.wall_ms())
        now = clock.wall_ms()
        # A session longer than the simulated minutes: the member stays.
        member, gen = await _member(coord, clock, "consumers", "sub", session_ms=10 * MINUTE)
        assert coord.commit_offsets("consumers", member, None, gen,
                                    {("sub", 0): _offset(now, 1), ("other", 0): _offset(now, 2)}) \
            == {("sub", 0): E.none, ("other", 0): E.none}
        assert coord.commit_offsets("simple", "", None, -1, {("sub", 0): _offset(now, 3)}) \
            == {("sub", 0): E.none}
        tick_at(now + MINUTE - 1000)
        assert len(coord.fetch_offsets("consumers", None)[1]) == 2
        # A minute after their commit: a Stable group keeps what it subscribes to; the simple
        # consumer's group (no protocol type) loses its offsets and dies.
        tick_at(now + MINUTE + 1)
        assert [tp for tp, _ in coord.fetch_offsets("consumers", None)[1]] == [("sub", 0)]
        assert "simple" not in coord.groups
        # An Empty group keeps its offsets for the retention period after it emptied.
        assert coord.leave_group("consumers", [(member, None, None)]) == (E.none, [E.none])
        emptied = coord.groups["consumers"].state_ms
        assert coord.groups["consumers"].state == GroupState.EMPTY
        tick_at(emptied + MINUTE - 1)
        assert coord.fetch_offsets("consumers", None)[1]
        tick_at(emptied + MINUTE + 1)
        assert coord.fetch_offsets("consumers", None) == (E.none, [])
        assert coord.describe_group("consumers") == (E.none, None)
    finally:
        b.close()


async def test_coordinator_loading_answers_load_in_progress(tmp_path):
    b = await _broker(tmp_path)
    b.create_topic("t", 1)
    coord = b.groups
    now = coord.wall_ms()
    for i in range(200):
        coord.commit_offsets(f"group-{i}", "", None, -1, {("t", 0): _offset(now, i)})
    b.close()

    b = await _broker(tmp_path)  # a running event loop: the replay runs in the background
    try:
        coord = b.groups
        assert coord.loading
        assert coord.fetch_offsets("group-7", None) == (E.coordinator_load_in_progress, [])
        assert coord.commit_offsets("group-7", "", None, -1, {("t", 0): _offset(now, 1)}) \
            == {("t", 0): E.coordinator_load_in_progress}
        assert (await coord.join_group("group-7", "", None, True, False, "c", "/h", 10000,
                                       10000, "consumer", [("range", b"")], None)).error \
            == E.coordinator_load_in_progress
        assert (await coord.sync_group("group-7", 1, "m", None, None, None, {})).error \
            == E.rebalance_in_progress
        assert coord.heartbeat("group-7", "m", None, 1) == E.none
        assert coord.list_groups(set(), set())[0] == E.coordinator_load_in_progress
        await asyncio.wait_for(coord._load_task, 30)
        assert not coord.loading
        assert coord.fetch_offsets("group-7", None)[1][0][1].metadata == "m7"
        assert len(coord.list_groups(set(), set())[1]) == 200
    finally:
        b.close()


async def test_initial_rebalance_delay_gathers_members(tmp_path):
    b = await _broker(tmp_path, **{"group.initial.rebalance.delay.ms": "300"})
    try:
        coord = b.groups
        group = f"delayed-{uuid.uuid4().hex[:6]}"
        joins = []
        for name in ("a", "b", "c"):
            joins.append(coord.join_group(group, "", None, False, False, name, "/h", 5000,
                                          10000, "consumer", [("range", b"")], None))
            await asyncio.sleep(0.1)
        results = await asyncio.wait_for(asyncio.gather(*joins), 10)
        assert {r.generation for r in results} == {1}
        assert {r.error for r in results} == {E.none}
        assert sum(1 for r in results if r.members) == 1  # the leader sees all three
        assert len(next(r for r in results if r.members).members) == 3
    finally:
        b.close()
