# Share-partition state in a real __share_group_state (a LogManager in a temporary directory),
# driven through the ShareCoordinator on a fake clock: Kafka's record layouts and state
# partitioning, snapshots every share.coordinator.snapshot.update.records.per.snapshot
# updates, updates carrying only what changed, pruning below the oldest needed snapshot, and
# replay after a restart.
from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from kafkalite.clock import FakeClock
from kafkalite.config import BrokerConfig
from kafkalite.coordinator.offsets_log import java_string_hash
from kafkalite.coordinator.share_partition import ACCEPT, ACKNOWLEDGED, AVAILABLE, RELEASE
from kafkalite.coordinator.share_state import ShareCoordinator
from kafkalite.coordinator.share_state_log import (SNAPSHOT, UPDATE, ShareStateLog, TOPIC,
                                                   decode_key, decode_value, delta, overlay)
from kafkalite.coordinator.share_store import ShareStore
from kafkalite.log.manager import LogManager


class Harness:
    def __init__(self, tmp_path: Path, per_snapshot: int = 3, partitions: int = 5):
        self.tmp_path, self.per_snapshot, self.partitions = tmp_path, per_snapshot, partitions
        self.clock = FakeClock()
        self.open()

    def open(self) -> None:
        self.config = BrokerConfig({"log.dirs": str(self.tmp_path / "data")})
        self.logs = LogManager(self.config)
        self.logs.open()
        if self.logs.get("t") is None:
            self.logs.create_topic("t", 2)
        self.synced: list[set[int]] = []

        async def durable(parts: set[int]) -> None:
            self.synced.append(parts)
        self.log = ShareStateLog(self.logs, self.logs.create_topic, self.partitions, 1 << 20)
        store = ShareStore(self.log, lambda n: self.logs.topics[n].topic_id,
                           lambda tid: getattr(self.logs.by_id.get(tid), "name", None),
                           durable, self.per_snapshot)
        self.sc = ShareCoordinator(self.clock, self.config, lambda g, n: {
            "share.record.lock.duration.ms": 30000, "share.auto.offset.reset": "earliest",
            "share.session.timeout.ms": 45000, "share.heartbeat.interval.ms": 5000}[n],
            lambda t, p: (0, 1000), lambda t: 2, store)
        self.sc.open()  # as Broker.open: the replay, at once without a running loop

    def restart(self) -> None:
        self.sc.close()
        self.logs.close()
        self.open()

    def records(self) -> list[tuple[int, tuple, object]]:
        """(state partition, decoded key, decoded value) of every record from log start."""
        out = []
        t = self.log.topic()
        for i in range(len(t.partitions)):
            for r in self.log.replay(i):
                if r is not None and r.key is not None:
                    k = decode_key(r.key)
                    out.append((i, k, decode_value(k[0], r.value)))
        return out


def persist(sc: ShareCoordinator) -> None:
    asyncio.run(sc.persist())


def four_accepted(h: Harness) -> None:
    """t-1: offsets 0-9 acquired, 0-3 accepted, written."""
    sp = h.sc.partition("g", "t", 1)
    sp.acquire("m", [(0, 9)], 100)
    sp.acknowledge("m", [(0, 3, (ACCEPT,))])
    persist(h.sc)


def test_record_layout_and_partitioning(tmp_path):
    h = Harness(tmp_path)
    four_accepted(h)
    (part, key, value), = h.records()
    tid = h.logs.topics["t"].topic_id
    assert key == (SNAPSHOT, "g", tid, 1)
    import base64
    coord_key = "g:%s:1" % base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")
    assert part == abs(java_string_hash(coord_key)) % 5
    assert value.start == 4 and value.batches == [(4, 9, AVAILABLE, 1)]
    raw_key = h.log.topic().partitions[part].read(0, 1 << 20)
    assert struct.pack(">hh", 0, 1) + b"g" + tid.bytes + struct.pack(">i", 1) in bytes(raw_key)
    assert h.synced == [{part}], "the write is handed to durable() before answering"


def test_updates_carry_changes_then_snapshot_and_prune(tmp_path):
    h = Harness(tmp_path, per_snapshot=3)
    sp = h.sc.partition("g", "t", 0)
    sp.acquire("m", [(0, 99)], 1000)
    persist(h.sc)  # snapshot 0
    sp.acknowledge("m", [(0, 9, (RELEASE,))])  # as written: AVAILABLE, delivered once
    persist(h.sc)
    assert len(h.records()) == 1, "nothing changed, nothing written"
    for i in range(1, 6):  # 3 updates, then a snapshot, then an update
        sp.acknowledge("m", [(10 * i, 10 * i + 9, (ACCEPT,))])
        persist(h.sc)
    recs = [(k[0], v) for _p, k, v in h.records()]
    kinds = [k for k, _v in recs]
    # Records below the second snapshot were pruned: replay starts at it.
    assert kinds == [SNAPSHOT, UPDATE]
    snap, upd = recs[0][1], recs[1][1]
    assert snap.snapshot_epoch == 1 and upd.snapshot_epoch == 1
    assert upd.batches == [(50, 59, ACKNOWLEDGED, 1)], "an update carries only what changed"
    assert upd.start == -1, "the start offset did not move"


def test_state_replayed_after_restart(tmp_path):
    h = Harness(tmp_path, per_snapshot=2)
    sp = h.sc.partition("g", "t", 0)
    sp.acquire("m", [(0, 49)], 1000)
    for first in range(0, 50, 5):
        sp.acknowledge("m", [(first, first + 4, (ACCEPT if first % 10 else RELEASE,))])
        persist(h.sc)
    want = (sp.start, sp.end, [(s.first, s.last, s.state, s.count) for s in sp.spans])
    h.restart()
    back = h.sc.partition("g", "t", 0)
    assert (back.start, back.end, [(s.first, s.last, s.state, s.count)
                                   for s in back.spans]) == want
    assert back.state_of(0) == (AVAILABLE, 1) and back.start == 0
    assert h.logs.get(TOPIC).internal


def test_deleted_topic_state_not_replayed(tmp_path):
    h = Harness(tmp_path)
    h.sc.partition("g", "t", 0).acquire("m", [(0, 9)], 100)
    persist(h.sc)
    asyncio.run(h.logs.delete_topic_async("t"))
    h.sc.topic_deleted("t")
    h.restart()  # "t" is made again, with a new topic id
    assert h.sc.store.state == {}
    assert h.sc.partition("g", "t", 0).start == 0


def test_overlay_replaces_covered_offsets():
    spans = [(0, 9, AVAILABLE, 1), (10, 19, AVAILABLE, 2)]
    assert overlay(spans, [(5, 12, ACKNOWLEDGED, 1)]) == [
        (0, 4, AVAILABLE, 1), (5, 12, ACKNOWLEDGED, 1), (13, 19, AVAILABLE, 2)]


def test_delta_is_what_overlay_needs():
    old = [(10, 99, AVAILABLE, 1)]
    new = [(10, 39, AVAILABLE, 1), (40, 49, ACKNOWLEDGED, 1), (50, 99, AVAILABLE, 1),
           (100, 109, AVAILABLE, 1)]
    d = delta(old, new)
    assert d == [(40, 49, ACKNOWLEDGED, 1), (100, 109, AVAILABLE, 1)]
    assert overlay(old, d) == [(10, 39, AVAILABLE, 1), (40, 49, ACKNOWLEDGED, 1),
                               (50, 99, AVAILABLE, 1), (100, 109, AVAILABLE, 1)]


def test_group_view_for_the_group_coordinator(tmp_path):
    h = Harness(tmp_path)
    h.sc.groups.heartbeat("live", "m1", 0, None, ("t",))
    h.sc.partition("idle", "t", 0).acquire("m", [(0, 4)], 10)
    persist(h.sc)
    assert h.sc.list_groups() == [("idle", "Empty"), ("live", "Stable")]
    assert h.sc.has_group("idle") and not h.sc.has_group("nope")
    assert asyncio.run(h.sc.delete_group("live")).name == "non_empty_group"
    assert asyncio.run(h.sc.delete_group("nope")).name == "group_id_not_found"
    assert asyncio.run(h.sc.delete_group("idle")).name == "none"
    h.restart()
    assert h.sc.list_groups() == [], "the deletion (a tombstone) survives a restart"


def test_replay_in_background_under_a_running_loop(tmp_path):
    h = Harness(tmp_path)
    four_accepted(h)
    h.sc.close()
    h.logs.close()

    async def reopen() -> tuple[bool, bool, int]:
        h.open()  # the coordinator opens on the broker's loop, as Broker.open under serve()
        loading_at_open = h.sc.loading and not h.sc.loaded.is_set()
        await asyncio.wait_for(h.sc.loaded.wait(), 10)
        return loading_at_open, h.sc.loading, h.sc.partition("g", "t", 1).start
    assert asyncio.run(reopen()) == (True, False, 4)
