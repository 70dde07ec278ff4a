# A task that keeps one znode's children in view: refresh() reads them with a watch set, and
# runs again at each watch event on the path and after each new session (whose watches are
# gone). Refresh errors are logged; the next event or session reads again.
from __future__ import annotations

import asyncio
import logging

from .zk import SessionEvent, WatchEvent, ZkClient, ZkError


class PathFollower:
    path: str  # the watched znode
    log: logging.Logger

    def __init__(self, zk: ZkClient):
        self.zk = zk
        self._task: asyncio.Task | None = None

    async def refresh(self) -> None:
        raise NotImplementedError

    def follow(self, first_refresh: bool) -> None:
        """Start following; `first_refresh` when the caller has not read the path yet."""
        self._task = asyncio.create_task(self._pump(self.zk.subscribe(), first_refresh))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _pump(self, events: asyncio.Queue, first_refresh: bool) -> None:
        try:
            if first_refresh:
                await self._refresh_logged()
            while True:
                event = await events.get()
                if (isinstance(event, WatchEvent) and event.path == self.path) or \
                        (isinstance(event, SessionEvent) and event.state == "CONNECTED"):
                    await self._refresh_logged()
        finally:
            self.zk.unsubscribe(events)

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except ZkError as e:
            self.log.info("reading %s: %r", self.path, e)
        except Exception:  # noqa: BLE001 - the watch must outlive one bad read
            self.log.exception("following %s failed", self.path)
