# KIP-932 share-group membership written to __consumer_offsets as Kafka's ShareGroup* records
# (key versions 9-14) and handed to the share coordinator when the group coordinator replays
# the topic: a real offsets log in a temporary directory, both coordinators closed and built
# again over it (what a broker restart does), the fake clock. Members come back with their
# ids, epochs and assignments and go on heartbeating without a new group epoch; members that
# do not return are fenced after their session timeout; members that left and deleted
# groups stay gone; compaction keeps the live records.
from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from kafkalite.coordinator import share_group_records as S
from kafkalite.coordinator.offsets_log import TOPIC
from kafkalite.coordinator.share_group import ShareGroupError
from kafkalite.coordinator.share_state import ShareCoordinator
from kafkalite.wire.errors import ErrorCode
from tests.unit.test_consumer_group_store import Broker as ConsumerBroker

SESSION = 45000
SETTINGS = {"share.record.lock.duration.ms": 30000, "share.auto.offset.reset": "earliest",
            "share.session.timeout.ms": SESSION, "share.heartbeat.interval.ms": 5000}


class Broker(ConsumerBroker):
    """A broker's group coordinator (as test_consumer_group_store's) and share coordinator,
    attached as Broker.open attaches them."""

    def __init__(self, data: Path, first: bool = False):
        super().__init__(data, first)
        if first:
            self.logs.create_topic("u", 1)
        self.sc = ShareCoordinator(self.clock, self.config, lambda g, n: SETTINGS[n],
                                   lambda t, p: (0, 0),
                                   lambda t: len(self.logs.topics[t].partitions)
                                   if t in self.logs.topics else None)
        self.sc.attach_offsets(self.coord)
        self.sc.open()
        self.groups = self.sc.groups

    def beat(self, member: str, epoch: int, topics=None, group: str = "g"):
        return self.groups.heartbeat(group, member, epoch, None, topics, "client", "/host")

    def close(self) -> None:
        self.sc.close()
        super().close()


def snapshot(b: Broker, group: str = "g"):
    g = b.groups.groups[group]
    return (g.epoch, g.topic_sizes, g.target,
            {mid: (m.epoch, m.previous_epoch, m.topics, m.assignment, m.client_id,
                   m.client_host) for mid, m in g.members.items()})


def three_members(b: Broker) -> None:
    for m in ("a", "b", "c"):
        b.beat(m, 0, ("t", "u") if m == "c" else ("t",))
    for m in ("a", "b", "c"):  # each moves to the last group epoch
        b.beat(m, b.groups.groups["g"].members[m].epoch)


def test_members_come_back_with_epochs_and_assignments(tmp_path):
    b = Broker(tmp_path, first=True)
    three_members(b)
    before = snapshot(b)
    assert before[0] == 3 and before[3]["a"][0] == 3
    b.close()
    b = Broker(tmp_path)
    assert not b.sc.loading and snapshot(b) == before
    member, send = b.beat("b", before[3]["b"][0])  # heartbeats on, no new group epoch
    assert member is not None and not send and b.groups.groups["g"].epoch == 3
    b.close()


def test_member_that_does_not_return_is_fenced_after_its_session(tmp_path):
    b = Broker(tmp_path, first=True)
    three_members(b)
    b.close()
    b = Broker(tmp_path)
    for _ in range(4):  # a and b come back; c does not
        b.clock.advance(SESSION // 4)
        for m in ("a", "b"):
            b.beat(m, b.groups.groups["g"].members[m].epoch)
    g = b.groups.groups["g"]
    assert sorted(g.members) == ["a", "b"] and g.epoch == 4
    b.close()
    b = Broker(tmp_path)  # c's leave was written: it stays gone
    assert sorted(b.groups.groups["g"].members) == ["a", "b"]
    try:
        b.beat("c", 3)
        raise AssertionError("c is still a member")
    except ShareGroupError as e:
        assert e.code == ErrorCode.unknown_member_id
    b.close()


def test_left_members_and_deleted_groups_stay_gone(tmp_path):
    b = Broker(tmp_path, first=True)
    three_members(b)
    b.beat("a", -1)
    b.beat("x", 0, ("t",), group="h")
    b.beat("x", -1, group="h")
    asyncio.run(b.sc.delete_group("h"))
    b.close()
    b = Broker(tmp_path)
    assert sorted(b.groups.groups["g"].members) == ["b", "c"] and "h" not in b.groups.groups
    b.close()


def test_records_laid_out_as_kafka(tmp_path):
    b = Broker(tmp_path, first=True)
    b.beat("a", 0, ("t",))
    found = {S.parse_key(r.key)[0]: (S.parse_key(r.key)[1:], r.value)
             for r in b.coord.store.replay(0) if r is not None and r.key is not None}
    t_id = b.logs.get("t").topic_id
    b.close()
    assert sorted(found) == [9, 10, 11, 12, 13, 14]
    assert found[11][0] == ("g", None) and found[10][0] == ("g", "a")
    # value version 0, epoch 1, metadata hash 0, no tagged fields
    assert found[11][1] == struct.pack(">hiq", 0, 1, 0) + b"\x00"
    # version 0, epoch 1, previous epoch 0, state 0, one topic (compact array 2) by id
    cur = found[14][1]
    assert cur[:11] == struct.pack(">hiib", 0, 1, 0, 0) and cur[11] == 2
    assert cur[12:28] == t_id.bytes
