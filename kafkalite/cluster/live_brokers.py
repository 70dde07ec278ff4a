# The live broker set as the controller needs it (kafkalite.cluster.controller): who is
# registered under /brokers/ids now, and a call after every change. LiveBrokers is the
# interface; ZkLiveBrokers, the controller's default, keeps a children watch on /brokers/ids
# itself. A broker's membership component can stand in for it by offering the same three
# methods, so one watch serves the whole broker.
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping, Protocol

from . import zkdata
from .zk import NoNode, SessionEvent, WatchEvent, ZkClient, ZkError

log = logging.getLogger("kafkalite.controller")


class LiveBrokers(Protocol):
    """Where the controller learns which brokers are alive; listeners are called (on the
    loop) after every change."""

    def live_brokers(self) -> Mapping[int, zkdata.BrokerRegistration]: ...

    def add_listener(self, callback: Callable[[], None]) -> None: ...

    def remove_listener(self, callback: Callable[[], None]) -> None: ...


class ZkLiveBrokers:
    """LiveBrokers from a children watch on /brokers/ids and the registrations there."""

    def __init__(self, zk: ZkClient):
        self.zk = zk
        self._brokers: dict[int, zkdata.BrokerRegistration] = {}
        self._listeners: list[Callable[[], None]] = []
        self._task: asyncio.Task | None = None

    def live_brokers(self) -> Mapping[int, zkdata.BrokerRegistration]:
        return dict(self._brokers)

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    async def start(self) -> None:
        events = self.zk.subscribe()
        await self.zk.ensure_path(zkdata.BROKER_IDS)
        await self.refresh()
        self._task = asyncio.create_task(self._pump(events))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _pump(self, events: asyncio.Queue) -> None:
        try:
            while True:
                event = await events.get()
                # a new session (after expiry) has lost the watch: read and watch again
                if (isinstance(event, WatchEvent) and event.path == zkdata.BROKER_IDS) or \
                        (isinstance(event, SessionEvent) and event.state == "CONNECTED"):
                    try:
                        await self.refresh()
                    except ZkError as e:  # the next CONNECTED reads again
                        log.info("reading %s: %s", zkdata.BROKER_IDS, e)
        finally:
            self.zk.unsubscribe(events)

    async def refresh(self) -> None:
        ids = {int(c) for c in await self.zk.children(zkdata.BROKER_IDS, watch=True)
               if c.isdigit()}
        brokers = {b: r for b, r in self._brokers.items() if b in ids}
        for b in sorted(ids - set(brokers)):
            try:
                data, _ = await self.zk.get(zkdata.broker_path(b))
            except NoNode:  # gone again already; the watch brings the next listing
                continue
            brokers[b] = zkdata.BrokerRegistration.decode(b, data)
        if brokers.keys() != self._brokers.keys():
            self._brokers = brokers
            for callback in list(self._listeners):
                callback()
