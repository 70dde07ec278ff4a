# The live broker set as the controller needs it (kafkalite.cluster.controller): who is
# registered under /brokers/ids now, and a call after every change. LiveBrokers is the
# interface; ZkLiveBrokers, the controller's default, keeps a children watch on /brokers/ids
# itself. A broker's membership component can stand in for it by offering the same three
# methods, so one watch serves the whole broker.
from __future__ import annotations

import logging
from typing import Callable, Mapping, Protocol

from . import zkdata
from .follow import PathFollower
from .zk import NoNode, ZkClient

log = logging.getLogger("kafkalite.controller")


class LiveBrokers(Protocol):
    """Where the controller learns which brokers are alive; listeners are called (on the
    loop) after every change."""

    def live_brokers(self) -> Mapping[int, zkdata.BrokerRegistration]: ...

    def add_listener(self, callback: Callable[[], None]) -> None: ...

    def remove_listener(self, callback: Callable[[], None]) -> None: ...


class ZkLiveBrokers(PathFollower):
    """LiveBrokers from a children watch on /brokers/ids and the registrations there."""
    path = zkdata.BROKER_IDS
    log = log

    def __init__(self, zk: ZkClient):
        super().__init__(zk)
        self._brokers: dict[int, zkdata.BrokerRegistration] = {}
        self._listeners: list[Callable[[], None]] = []

    def live_brokers(self) -> Mapping[int, zkdata.BrokerRegistration]:
        return dict(self._brokers)

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    async def start(self) -> None:
        await self.zk.ensure_path(zkdata.BROKER_IDS)
        await self.refresh()
        self.follow(first_refresh=False)

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
