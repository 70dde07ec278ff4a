# KIP-848 groups written to __consumer_offsets as Kafka's ConsumerGroup* records (key
# versions 3-8) and replayed at start: a real offsets log in a temporary directory, the
# coordinator closed and built again over it (what a broker restart does), the fake clock.
# Members come back with their ids, epochs and assignments, go on heartbeating without a new
# group epoch, and are fenced when they do not return; members that left and deleted groups
# stay gone (tombstones); compaction keeps the live records. Classic members of a consumer
# group come back with their ClassicMemberMetadata; a downgraded group comes back classic.
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator import consumer_group_records as R
from kafkalite.coordinator.consumer_group import MemberState
from kafkalite.coordinator.consumer_group_coordinator import Heartbeat
from kafkalite.coordinator.groups_coordinator import GroupCoordinator
from kafkalite.coordinator.offsets_log import TOPIC
from kafkalite.log.manager import LogManager
from kafkalite.wire.errors import ErrorCode
from kafkalite.wire.record_iter import iter_records

SESSION = 45000


class Broker:
    """The parts of a broker a consumer group lives on, over one data directory."""

    def __init__(self, data: Path, first: bool = False):
        self.clock = FakeClock()
        self.config = BrokerConfig({"log.dirs": str(data), "offsets.topic.num.partitions": "1"})
        self.logs = LogManager(self.config)
        self.logs.open()
        if first:
            self.logs.create_topic("t", 6)
        self.coord = GroupCoordinator(self.config, self.logs, self.logs.create_topic,
                                      clock=self.clock)
        self.coord.open()  # no running loop: replays at once
        self.coord.find_coordinator()
        self.cg = self.coord.consumer_coordinator

    def join(self, member: str, group: str = "g"):
        return self.cg.heartbeat(Heartbeat(group, member, 0, rebalance_timeout_ms=30000,
                                           subscribed_names=("t",), owned={}))

    def beat(self, member: str, epoch: int, owned, group: str = "g"):
        return self.cg.heartbeat(Heartbeat(group, member, epoch, owned=owned))

    def close(self) -> None:
        self.coord.close()
        self.logs.close()


def stable_group(b: Broker, members: list[str]) -> dict[str, tuple[int, dict]]:
    """Join `members` and heartbeat until every one holds its target."""
    owned: dict[str, tuple[int, dict]] = {}
    for m in members:
        a = b.join(m)
        owned[m] = (a.member_epoch, a.assignment or {})
    for _ in range(10):
        for m in members:
            epoch, held = owned[m]
            a = b.beat(m, epoch, held)
            owned[m] = (a.member_epoch, a.assignment if a.assignment is not None else held)
        if b.cg.groups["g"].state() == "Stable":
            return owned
    raise AssertionError(f"not stable: {b.cg.groups['g'].state()}")


def snapshot(b: Broker, group: str = "g"):
    g = b.cg.groups[group]
    return (g.epoch, g.assignment_epoch, g.subscription_metadata,
            {mid: (m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking,
                   m.subscribed_names, m.rebalance_timeout_ms, m.client_id)
             for mid, m in g.members.items()},
            g.target)


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


def test_members_survive_a_restart_and_heartbeat_without_a_rebalance(data):
    b = Broker(data, first=True)
    owned = stable_group(b, ["m1", "m2", "m3"])
    before = snapshot(b)
    b.close()

    b = Broker(data)
    try:
        assert snapshot(b) == before
        assert b.cg.groups["g"].state() == "Stable"
        epoch = before[0]
        for m, (member_epoch, held) in owned.items():
            a = b.beat(m, member_epoch, held)
            assert a.member_epoch == member_epoch  # no new epoch: no rebalance
        assert b.cg.groups["g"].epoch == epoch
        # The restored members' sessions run again: one that never returns is fenced.
        b.clock.advance(SESSION - 1)
        for m, (member_epoch, held) in list(owned.items())[:2]:
            b.beat(m, member_epoch, held)
        b.clock.advance(2)
        assert sorted(b.cg.groups["g"].members) == ["m1", "m2"]
        assert b.cg.groups["g"].epoch == epoch + 1
    finally:
        b.close()


def test_restored_members_that_never_return_are_fenced(data):
    """No heartbeat at all after the restart: the load itself armed the session timers, so
    the members are fenced one session timeout later and the group ends Empty."""
    b = Broker(data, first=True)
    stable_group(b, ["m1", "m2", "m3"])
    epoch = b.cg.groups["g"].epoch
    b.close()

    b = Broker(data)
    try:
        assert len(b.cg.groups["g"].members) == 3
        b.clock.advance(SESSION - 1)
        assert len(b.cg.groups["g"].members) == 3
        b.clock.advance(1)
        group = b.cg.groups["g"]
        assert group.members == {} and group.state() == "Empty"
        assert group.epoch == epoch + 3
    finally:
        b.close()
    b = Broker(data)  # the fencing was written: the members stay gone
    try:
        assert b.cg.groups["g"].members == {}
    finally:
        b.close()


def test_left_members_and_deleted_groups_stay_gone(data):
    b = Broker(data, first=True)
    owned = stable_group(b, ["m1", "m2"])
    b.cg.heartbeat(Heartbeat("g", "m2", -1))
    b.join("x", group="gone")
    b.cg.heartbeat(Heartbeat("gone", "x", -1))
    assert b.cg.delete("gone") is not None
    after_leave = snapshot(b)
    b.close()

    b = Broker(data)
    try:
        assert "gone" not in b.cg.groups and b.coord.group_type("gone") is None
        assert snapshot(b) == after_leave and set(b.cg.groups["g"].members) == {"m1"}
        epoch, held = owned["m1"]
        a = b.beat("m1", after_leave[3]["m1"][0], after_leave[3]["m1"][3])
        assert a.member_epoch == after_leave[0]
    finally:
        b.close()


def test_records_are_kafkas_key_versions_and_layouts(data):
    b = Broker(data, first=True)
    try:
        stable_group(b, ["m1"])
        p = b.logs.get(TOPIC).partitions[0]
        raw = p.read(p.log_start_offset, 1 << 20)
        records = []
        pos = 0
        while pos < len(raw):
            size = struct.unpack_from(">i", raw, pos + 8)[0] + 12
            records += [(r.key, r.value) for r in iter_records(bytes(raw[pos:pos + size]))]
            pos += size
        latest = dict(records)
        kinds = {struct.unpack_from(">h", k)[0] for k in latest}
        assert kinds == {3, 4, 5, 6, 7, 8}
        t_id = b.logs.get("t").topic_id
        cur = latest[R.key(R.CURRENT, "g", "m1")]
        # version 0, epoch, previous epoch, state STABLE, one topic (compact array 2) by id
        assert cur[:2] == b"\x00\x00" and cur[10:11] == b"\x00" and cur[11] == 2
        assert cur[12:28] == t_id.bytes
        assert R.parse_epoch(latest[R.key(R.GROUP, "g")]) == b.cg.groups["g"].epoch
        m = R.parse_member(latest[R.key(R.MEMBER, "g", "m1")], "m1")
        assert (m.subscribed_names, m.rebalance_timeout_ms) == (("t",), 30000)
    finally:
        b.close()


def test_a_member_still_revoking_comes_back_revoking(data):
    b = Broker(data, first=True)
    owned = stable_group(b, ["m1"])
    b.join("m2")
    epoch, held = owned["m1"]
    b.beat("m1", epoch, held)  # told to revoke three partitions
    assert b.cg.groups["g"].members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    before = snapshot(b)
    b.close()

    b = Broker(data)
    try:
        assert snapshot(b) == before
        m1 = b.cg.groups["g"].members["m1"]
        a = b.beat("m1", epoch, m1.assigned)  # revoked now
        assert a.member_epoch == b.cg.groups["g"].assignment_epoch
    finally:
        b.close()


def test_a_group_given_back_to_the_classic_protocol_does_not_return(data):
    b = Broker(data, first=True)
    b.join("m1")
    b.cg.heartbeat(Heartbeat("g", "m1", -1))
    assert b.coord.release_consumer_group("g")  # a classic JoinGroup takes the empty id
    b.close()

    b = Broker(data)
    try:
        assert "g" not in b.cg.groups
    finally:
        b.close()


def classic_join(b: Broker, member_id: str = ""):
    from tests.unit.test_consumer_group_migration import rejoin
    return rejoin(b.cg, member_id, require_known_id=False)


def test_classic_members_of_a_consumer_group_survive_a_restart(data):
    b = Broker(data, first=True)
    b.join("m1")
    r = classic_join(b)
    cid, generation = r.member_id, r.generation
    value = b.cg.groups["g"].written[R.key(R.MEMBER, "g", cid)]
    meta = b.cg.groups["g"].members[cid].classic.protocols[0][1]
    # Tag 0 (ClassicMemberMetadata), size, presence, session timeout, one protocol, no tags.
    body = (struct.pack(">i", 10000) + b"\x02" + b"\x06range"
            + bytes([len(meta) + 1]) + meta + b"\x00" + b"\x00")
    assert value.endswith(b"\x01\x00" + bytes([len(body) + 1]) + b"\x01" + body)
    b.close()

    b = Broker(data)
    try:
        member = b.cg.groups["g"].members[cid]
        assert member.classic is not None and member.classic.session_timeout_ms == 10000
        assert member.classic.protocols[0] == ("range", meta)
        assert b.coord.heartbeat("g", cid, None, generation) in (
            ErrorCode.none, ErrorCode.rebalance_in_progress)
        # Its session is the classic one it joined with, not group.consumer.session.timeout.ms.
        b.clock.advance(10000)
        assert cid not in b.cg.groups["g"].members
    finally:
        b.close()


def test_a_downgraded_group_comes_back_classic(data):
    b = Broker(data, first=True)
    b.join("m1")
    cid = classic_join(b).member_id
    b.cg.heartbeat(Heartbeat("g", "m1", -1))
    assert b.coord.group_type("g") == "classic"
    assert set(b.coord.groups["g"].members) == {cid}
    b.close()

    b = Broker(data)
    try:
        assert "g" not in b.cg.groups and b.coord.group_type("g") == "classic"
    finally:
        b.close()
