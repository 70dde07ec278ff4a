# kafkalite.cluster.membership's timers and session handling on the FakeClock: a new session
# registers again under a new broker epoch; a ZooKeeper error, or the id held by another
# session, is retried after a backoff on the injected clock, not before. ZooKeeper is an
# in-memory stand-in here (a real server cannot be made to fail on cue); the real one is in
# tests/cluster/test_membership.py. And without zookeeper.connect, kazoo is never imported.
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from kafkalite.clock import FakeClock
from kafkalite.cluster import zkdata
from kafkalite.cluster.membership import Membership, retry_delay_ms
from kafkalite.cluster.zk import (NodeExists, NoNode, SessionEvent, Stat, WatchEvent,
                                  ZkConnectionError)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENDPOINTS = [zkdata.Endpoint("PLAINTEXT", "127.0.0.1", 19092)]


class MemoryZk:
    """The ZkClient calls Membership makes, on a dict; `failures` are raised, in order, by
    the next registrations."""

    def __init__(self, connect: str, session_timeout_ms: int, connect_timeout_ms: int):
        self.connect = connect
        self.events: asyncio.Queue = asyncio.Queue()
        self.session_id = 1
        self.nodes: dict[str, tuple[bytes, int, int]] = {}  # path -> data, czxid, owner
        self.zxid = 0
        self.failures: list[Exception] = []

    async def start(self) -> None:
        self.events.put_nowait(SessionEvent("CONNECTED"))

    async def close(self) -> None:
        pass

    async def ensure_persistent_paths(self) -> None:
        pass

    async def get(self, path: str, watch: bool = False) -> tuple[bytes, Stat]:
        if path not in self.nodes:
            raise NoNode(path)
        data, czxid, owner = self.nodes[path]
        return data, Stat(0, czxid, owner)

    def put(self, path: str, data: bytes, owner: int) -> int:
        self.zxid += 1
        self.nodes[path] = (data, self.zxid, owner)
        return self.zxid

    async def create(self, path: str, data: bytes = b"", makepath: bool = False) -> str:
        if path in self.nodes:
            raise NodeExists(path)
        self.put(path, data, 0)
        return path

    async def checked_ephemeral_create(self, path: str, data: bytes) -> int:
        if self.failures:
            raise self.failures.pop(0)
        if path in self.nodes and self.nodes[path][2] != self.session_id:
            err = NodeExists(path)
            err.owner = self.nodes[path][2]
            raise err
        return self.put(path, data, self.session_id)

    async def children(self, path: str, watch: bool = False) -> list[str]:
        return [p.rsplit("/", 1)[1] for p in self.nodes if p.startswith(path + "/")]

    def expire(self) -> None:
        """The session expires (its ephemeral nodes go) and kazoo opens a new one."""
        self.nodes = {p: v for p, v in self.nodes.items() if v[2] != self.session_id}
        self.session_id += 1
        self.events.put_nowait(SessionEvent("LOST"))
        self.events.put_nowait(SessionEvent("CONNECTED"))


async def settle() -> None:
    """Let the membership task handle what is queued (bounded)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def joined(clock: FakeClock, tmp_path) -> tuple[Membership, MemoryZk]:
    m = Membership("zk:2181/kl", 1, clock, 2000, client_factory=MemoryZk)
    await m.join(str(tmp_path))
    await m.register(ENDPOINTS, {"PLAINTEXT": "PLAINTEXT"})
    await settle()  # the first CONNECTED
    return m, m.client


async def test_a_new_session_registers_again_under_a_new_epoch(tmp_path):
    clock = FakeClock()
    m, zk = await joined(clock, tmp_path)
    first = m.broker_epoch
    assert set(m.members) == {1} and m.members[1].epoch == first
    zk.expire()
    await settle()
    assert m.broker_epoch > first and m.members[1].epoch == m.broker_epoch
    assert zk.nodes[zkdata.broker_path(1)][2] == zk.session_id
    await m.close()


async def test_a_failed_registration_is_retried_after_the_backoff(tmp_path):
    clock = FakeClock()
    m, zk = await joined(clock, tmp_path)
    first = m.broker_epoch
    zk.failures = [ZkConnectionError("connection loss")]
    zk.expire()
    await settle()
    assert m.broker_epoch == first  # failed: waiting on the clock
    assert zkdata.broker_path(1) not in zk.nodes
    clock.advance(retry_delay_ms(1) - 1)
    await settle()
    assert m.broker_epoch == first
    clock.advance(1)
    await settle()
    assert m.broker_epoch > first and m.members[1].epoch == m.broker_epoch
    await m.close()


async def test_an_id_held_by_another_session_is_retried_with_a_growing_backoff(tmp_path):
    clock = FakeClock()
    m, zk = await joined(clock, tmp_path)
    zk.expire()
    zk.put(zkdata.broker_path(1), b"{}", 999)  # another broker took id 1 meanwhile...
    await settle()
    assert zk.nodes[zkdata.broker_path(1)][2] == 999
    for attempt in (1, 2, 3):
        clock.advance(retry_delay_ms(attempt))
        await settle()
        assert zk.nodes[zkdata.broker_path(1)][2] == 999
    del zk.nodes[zkdata.broker_path(1)]  # ...and its session ended
    clock.advance(retry_delay_ms(4) - 1)
    await settle()
    assert zkdata.broker_path(1) not in zk.nodes
    clock.advance(1)
    await settle()
    assert zk.nodes[zkdata.broker_path(1)][2] == zk.session_id
    assert m.members[1].epoch == m.broker_epoch
    await m.close()


async def test_what_is_not_a_broker_registration_is_left_out_of_the_live_set(tmp_path):
    clock = FakeClock()
    m, zk = await joined(clock, tmp_path)
    zk.put(f"{zkdata.BROKER_IDS}/x", b"{}", 5)
    zk.put(zkdata.broker_path(2), b"not json", 6)
    zk.put(zkdata.broker_path(3), zk.nodes[zkdata.broker_path(1)][0], 7)
    zk.events.put_nowait(WatchEvent("CHILD", zkdata.BROKER_IDS))
    await settle()
    assert set(m.members) == {1, 3}
    await m.close()


def test_the_backoff_doubles_up_to_its_cap():
    delays = [retry_delay_ms(n) for n in range(1, 40)]
    assert delays[0] > 0 and delays[1] == 2 * delays[0]
    assert delays == sorted(delays) and delays[-1] == delays[-2] < 10 * delays[-1]


async def test_close_cancels_a_pending_retry(tmp_path):
    clock = FakeClock()
    m, zk = await joined(clock, tmp_path)
    zk.failures = [ZkConnectionError("connection loss")]
    zk.expire()
    await settle()
    assert clock.pending() == 1
    await m.close()
    assert clock.pending() == 0


def test_without_zookeeper_connect_kazoo_is_never_imported(tmp_path):
    script = f"""
import asyncio, sys
from kafkalite.config import BrokerConfig
from kafkalite.server import KafkaServer

async def main():
    server = KafkaServer(BrokerConfig({{"listeners": "PLAINTEXT://127.0.0.1:0",
                                       "log.dirs": {str(tmp_path)!r}}}))
    await server.start()
    await server.stop()
asyncio.run(main())
import kafkalite.cli
print(sorted(m for m in sys.modules if m.split(".")[0] == "kazoo"))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
