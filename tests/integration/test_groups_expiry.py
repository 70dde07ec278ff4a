# Time-driven behaviour of the group coordinator. Over sockets: an offset committed with an
# explicit retention (OffsetCommit v2-4) expires. In-process, against a real Broker and its
# real log (the coordinator is a sans-socket state machine whose clock is the tick(now_ms)
# the server calls every second): offsets of an Empty group expire offsets.retention.minutes
# after it emptied, a Stable consumer group keeps its subscribed topics' offsets, sessions
# and pending members expire, a restarted coordinator answers COORDINATOR_LOAD_IN_PROGRESS
# until it has replayed the offsets topic, and the initial rebalance delay gathers members.
from __future__ import annotations

import asyncio
import datetime
import uuid

from kio.schema.errors import ErrorCode as E

from kafkalite.broker.broker import Broker
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


async def _broker(tmp_path, **settings) -> Broker:
    cfg = BrokerConfig({"log.dirs": str(tmp_path / "data"),
                        "group.initial.rebalance.delay.ms": "0",
                        "offsets.retention.minutes": "1",
                        "offsets.retention.check.interval.ms": "1", **settings})
    b = Broker(cfg)
    b.open()
    return b


async def _member(coord, group: str, topic: str, session_ms: int = 10000):
    first = await coord.join_group(group, "", None, True, False, "client", "/127.0.0.1",
                                   10000, session_ms, "consumer",
                                   [("range", subscription(topic))], None)
    assert first.error == E.member_id_required
    r = await coord.join_group(group, first.member_id, None, True, False, "client",
                               "/127.0.0.1", 10000, session_ms, "consumer",
                               [("range", subscription(topic))], None)
    assert r.error == E.none
    s = await coord.sync_group(group, r.generation, r.member_id, None, None, None,
                               {r.member_id: b"a"})
    assert s.error == E.none
    return r.member_id, r.generation


def _offset(now: int, n: int) -> CommittedOffset:
    return CommittedOffset(n, -1, f"m{n}", now, -1)


async def test_retention_of_empty_stable_and_simple_groups(tmp_path):
    b = await _broker(tmp_path)
    try:
        b.create_topic("sub", 1)
        b.create_topic("other", 1)
        coord = b.extensions["groups"]
        now = coord.now_ms()
        member, gen = await _member(coord, "consumers", "sub")
        assert coord.commit_offsets("consumers", member, None, gen,
                                    {("sub", 0): _offset(now, 1), ("other", 0): _offset(now, 2)}) \
            == {("sub", 0): E.none, ("other", 0): E.none}
        assert coord.commit_offsets("simple", "", None, -1, {("sub", 0): _offset(now, 3)}) \
            == {("sub", 0): E.none}
        # The member stays alive across the simulated minutes (as if it heartbeated).
        coord.groups["consumers"].members[member].deadline_ms = now + 10 * MINUTE
        coord.tick(now + MINUTE - 1000)
        assert len(coord.fetch_offsets("consumers", None)[1]) == 2
        # A minute after their commit: a Stable group keeps what it subscribes to; the simple
        # consumer's group (no protocol type) loses its offsets and dies.
        coord.tick(now + MINUTE + 1)
        assert [tp for tp, _ in coord.fetch_offsets("consumers", None)[1]] == [("sub", 0)]
        assert "simple" not in coord.groups
        # An Empty group keeps its offsets for the retention period after it emptied.
        assert coord.leave_group("consumers", [(member, None, None)]) == (E.none, [E.none])
        emptied = coord.groups["consumers"].state_ms
        assert coord.groups["consumers"].state == GroupState.EMPTY
        coord.tick(emptied + MINUTE - 1)
        assert coord.fetch_offsets("consumers", None)[1]
        coord.tick(emptied + MINUTE + 1)
        assert coord.fetch_offsets("consumers", None) == (E.none, [])
        assert coord.describe_group("consumers") == (E.none, None)
    finally:
        b.close()


async def test_sessions_and_pending_members_expire_on_tick(tmp_path):
    # (A long retention check, or the emptied group, having no offsets, would be removed.)
    b = await _broker(tmp_path, **{"offsets.retention.check.interval.ms": "600000"})
    try:
        coord = b.extensions["groups"]
        member, gen = await _member(coord, "g", "t", session_ms=6000)
        pending = await coord.join_group("g", "", None, True, False, "late", "/127.0.0.1",
                                         10000, 6000, "consumer", [("range", b"")], None)
        assert pending.error == E.member_id_required
        now = coord.now_ms()
        coord.tick(now + 3000)
        assert coord.heartbeat("g", member, None, gen) == E.none
        assert coord.groups["g"].pending_members
        coord.tick(coord.now_ms() + 7000)  # no heartbeat for longer than the session
        group = coord.groups["g"]
        assert not group.members and not group.pending_members
        assert group.state == GroupState.EMPTY and group.generation == gen + 1
        assert coord.heartbeat("g", member, None, gen) == E.unknown_member_id
    finally:
        b.close()


async def test_coordinator_loading_answers_load_in_progress(tmp_path):
    b = await _broker(tmp_path)
    b.create_topic("t", 1)
    coord = b.extensions["groups"]
    now = coord.now_ms()
    for i in range(200):
        coord.commit_offsets(f"group-{i}", "", None, -1, {("t", 0): _offset(now, i)})
    b.close()

    b = await _broker(tmp_path)  # a running event loop: the replay runs in the background
    try:
        coord = b.extensions["groups"]
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
        coord = b.extensions["groups"]
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
