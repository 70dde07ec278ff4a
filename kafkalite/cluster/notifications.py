# What Kafka's ZkNodeChangeNotificationListener does for every kind of change notification
# (config changes, ACL changes): the notifications are persistent-sequential children
# <prefix><10 digits> of one znode; a follower handles, in sequence order, those newer than
# the last it handled, and deletes those older than 15 minutes (changeExpirationMs, on the
# follower's injected clock against the znode's creation time), as every Kafka broker purges
# them when it processes notifications. The handling itself is the subclass's.
from __future__ import annotations

from typing import Any, Iterable

from .follow import PathFollower
from .zk import NoNode, ZkClient

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs


def sequence_of(name: str, prefix: str) -> int:
    """<prefix>0000000042 -> 42 (-1 for a child that is not a notification)."""
    if not name.startswith(prefix):
        return -1
    digits = name[len(prefix):]
    return int(digits) if digits.isdigit() else -1


async def purge_expired(zk: ZkClient, parent: str, names: Iterable[str], now_wall_ms: int) -> None:
    """Delete the notifications among `names` created before the expiration window."""
    expired_before = now_wall_ms - CHANGE_EXPIRATION_MS
    for name in names:
        path = f"{parent}/{name}"
        st = await zk.exists(path)
        if st is not None and st.ctime < expired_before:
            try:
                await zk.delete(path)
            except NoNode:  # another broker purged it first
                pass


class NotificationFollower(PathFollower):
    """Follows `path`'s `prefix` notifications: process(data) for each new one, in order."""
    prefix: str

    def __init__(self, zk: ZkClient, clock: Any):
        super().__init__(zk)
        self.clock = clock
        self.last_seq = -1  # the newest notification handled

    async def process(self, data: bytes) -> None:
        raise NotImplementedError

    async def refresh(self) -> None:
        names = await self.zk.children(self.path, watch=True)
        changes = sorted((s, n) for n in names if (s := sequence_of(n, self.prefix)) >= 0)
        for seq, name in changes:
            if seq > self.last_seq:
                try:
                    data, _ = await self.zk.get(f"{self.path}/{name}")
                except NoNode:  # purged meanwhile: it was too old to matter
                    data = None
                if data is not None:
                    await self.process(data)
                self.last_seq = seq
        await purge_expired(self.zk, self.path, (n for _, n in changes), self.clock.wall_ms())
