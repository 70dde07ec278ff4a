# Wake-ups for long-poll fetches: a fetch that has too few bytes waits on the partitions it
# reads, and the produce path notifies them. No polling. A woken fetch learns which of its
# partitions had appends, so it re-reads only those (the others' answers cannot have changed).
# In a cluster, replication listens to every append (a leader's high watermark may move
# with it) before the waiters wake, and wakes them itself when a follower's fetch moves it.
from __future__ import annotations

import asyncio
from typing import Iterable

Key = tuple[str, int]


class _Waiter:
    __slots__ = ("fut", "woken")

    def __init__(self, fut: asyncio.Future):
        self.fut = fut
        self.woken: set[Key] = set()


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: dict[Key, set[_Waiter]] = {}
        self.append_listeners: list = []  # called as fn(topic, partition) at each append

    def notify(self, topic: str, partition: int) -> None:
        """An append to the partition."""
        for listener in self.append_listeners:
            listener(topic, partition)
        self.wake(topic, partition)

    def wake(self, topic: str, partition: int) -> None:
        """Wake the fetches waiting on the partition (its data or watermarks moved)."""
        key = (topic, partition)
        waiters = self._waiters.pop(key, None)
        if waiters:
            for w in waiters:
                w.woken.add(key)
                if not w.fut.done():
                    w.fut.set_result(None)

    async def wait(self, keys: Iterable[Key], timeout: float) -> set[Key]:
        """Wait until any of `keys` gets an append or `timeout` passes; returns the keys
        that had appends meanwhile (empty on timeout)."""
        if timeout <= 0:
            return set()
        w = _Waiter(asyncio.get_running_loop().create_future())
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, set()).add(w)
        try:
            await asyncio.wait_for(w.fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(w)
                    if not s:
                        del self._waiters[k]
        return w.woken

    def wake_all(self) -> None:
        for k in list(self._waiters):
            self.wake(*k)
