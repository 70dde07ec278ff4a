# Wake-ups for long-poll fetches: a fetch that has too few bytes waits on the partitions it
# reads, and the produce path notifies them. No polling.
from __future__ import annotations

import asyncio
from typing import Iterable


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    def notify(self, topic: str, partition: int) -> None:
        waiters = self._waiters.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, keys: Iterable[tuple[str, int]], timeout: float) -> bool:
        """Wait until any of `keys` gets an append or `timeout` passes; True if woken."""
        if timeout <= 0:
            return False
        fut = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[k]

    def wake_all(self) -> None:
        for k in list(self._waiters):
            self.notify(*k)
