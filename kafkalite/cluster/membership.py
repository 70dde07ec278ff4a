# The broker's membership in a ZooKeeper-coordinated cluster (issue 17), as a Kafka 3.x broker
# in ZooKeeper mode does it (KafkaServer.startup, KafkaZkClient):
#
#   join()      connect (bounded by zookeeper.connection.timeout.ms), create the chroot and
#               Kafka's persistent paths, adopt /cluster/id or create it, and refuse a data
#               directory whose meta.properties names another cluster
#               (InconsistentClusterIdException). Runs before the data directory is loaded,
#               so a fresh directory takes the cluster's id.
#   register()  once the listeners are bound: the ephemeral /brokers/ids/<id> (v5 JSON of the
#               advertised endpoints and rack); its czxid is the broker epoch. A node held by
#               another session means another broker has this id (or this broker's previous
#               run, whose session has not expired yet): the start fails, as Kafka's does.
#   close()     ends the session: the registration disappears at once (no session timeout).
#
# While running, one task consumes the client's events in order: a children watch on
# /brokers/ids keeps `members` (the live brokers with their decoded registrations and epochs)
# current, and a new session (kazoo reconnects by itself after LOST, with a new session id)
# registers again under a new broker epoch. A ZooKeeper error there is retried after a
# backoff on the injected clock; the timer only queues a wake-up, the work stays in the task.
from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from ..clock import Clock, TimerHandle
from ..log.datadir import META_PROPERTIES, read_properties, uuid_b64
from . import zkdata
from .zk import NodeExists, NoNode, SessionEvent, WatchEvent, ZkClient, ZkConnectionError, ZkError

log = logging.getLogger("kafkalite.cluster")

RETRY_BACKOFF_MS = 100  # first retry after a ZooKeeper error, doubled up to the max
RETRY_BACKOFF_MAX_MS = 5000
_RETRY = SessionEvent("RETRY")  # what a retry timer queues


class ClusterError(Exception):
    """A cluster problem that stops the broker's start (one line for the operator)."""


@dataclass(frozen=True)
class Member:
    """A live broker: its registration and broker epoch (the znode's czxid)."""
    registration: zkdata.BrokerRegistration
    epoch: int


def retry_delay_ms(attempt: int) -> int:
    """Backoff before retry number `attempt` (1, 2, ...): doubling, capped."""
    return min(RETRY_BACKOFF_MS << min(max(attempt - 1, 0), 16), RETRY_BACKOFF_MAX_MS)


class RetryTimer:
    """At most one pending retry, after retry_delay_ms of the failures in a row; reset()
    after a success (the membership and the cluster view retry their ZooKeeper work so)."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.attempt = 0
        self._handle: TimerHandle | None = None

    def schedule(self, fn: Any, *args: Any) -> None:
        self.cancel()
        self.attempt += 1
        self._handle = self.clock.call_later(retry_delay_ms(self.attempt), fn, *args)

    def reset(self) -> None:
        self.attempt = 0

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def stored_cluster_id(data_dir: str) -> str | None:
    """cluster.id from the data directory's meta.properties, None when there is none."""
    return read_properties(os.path.join(data_dir, META_PROPERTIES)).get("cluster.id")


class Membership:
    """This broker's registration in ZooKeeper and the live broker set."""

    def __init__(self, connect: str, broker_id: int, clock: Clock,
                 session_timeout_ms: int = 18000, connect_timeout_ms: int | None = None,
                 rack: str | None = None,
                 client_factory: Callable[..., Any] = ZkClient):
        self.broker_id = broker_id
        self.clock = clock
        self.rack = rack
        self.connect_timeout_ms = connect_timeout_ms or session_timeout_ms
        self.client = client_factory(connect, session_timeout_ms, self.connect_timeout_ms)
        self.cluster_id = ""
        self.broker_epoch = -1
        self.members: dict[int, Member] = {}  # updated in place: holders see it change
        self._registration: zkdata.BrokerRegistration | None = None
        self._registered_session = 0
        self._task: asyncio.Task | None = None
        self._retry = RetryTimer(clock)
        self._closed = False
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def from_config(cls, config: Any, clock: Clock) -> "Membership":
        return cls(config["zookeeper.connect"], config.node_id, clock,
                   config["zookeeper.session.timeout.ms"],
                   config["zookeeper.connection.timeout.ms"], config["broker.rack"])

    # --- start --------------------------------------------------------------------------

    async def join(self, data_dir: str) -> str:
        """Connect, create the persistent paths, settle the cluster id against the data
        directory's. Returns the cluster id; raises ClusterError."""
        try:
            await self.client.start()
        except ZkConnectionError as e:
            raise ClusterError(
                f"Timed out waiting for connection to ZooKeeper {self.client.connect} within "
                f"{self.connect_timeout_ms} ms (zookeeper.connection.timeout.ms): "
                f"{e.__cause__ or e}") from e
        try:
            await self.client.ensure_persistent_paths()
            self.cluster_id = await self._get_or_create_cluster_id()
        except ZkError as e:
            raise ClusterError(f"ZooKeeper {self.client.connect} failed during the start: "
                               f"{e!r}") from e
        stored = stored_cluster_id(data_dir)
        if stored is not None and stored != self.cluster_id:
            raise ClusterError(  # Kafka's InconsistentClusterIdException
                f"The Cluster ID {self.cluster_id} doesn't match stored clusterId "
                f"Some({stored}) in meta.properties. The broker is trying to join the wrong "
                f"cluster. Configured zookeeper.connect may be wrong.")
        return self.cluster_id

    async def _get_or_create_cluster_id(self) -> str:
        try:
            return zkdata.decode_cluster_id((await self.client.get(zkdata.CLUSTER_ID))[0])
        except NoNode:
            pass
        try:
            new = uuid_b64(uuid.uuid4())
            await self.client.create(zkdata.CLUSTER_ID, zkdata.encode_cluster_id(new),
                                     makepath=True)
            log.info("Created cluster id %s in ZooKeeper", new)
            return new
        except NodeExists:  # another broker created it first
            return zkdata.decode_cluster_id((await self.client.get(zkdata.CLUSTER_ID))[0])

    async def register(self, endpoints: Iterable[zkdata.Endpoint],
                       protocols: dict[str, str]) -> int:
        """Register this broker; its epoch. Then keep the live set and the registration
        current until close(). Raises ClusterError when the id is taken."""
        self._registration = zkdata.BrokerRegistration(
            self.broker_id, tuple(endpoints), protocols, self.clock.wall_ms(), self.rack)
        try:
            await self._register()
            await self._refresh()
        except NodeExists as e:
            raise ClusterError(self._taken_message(e)) from e
        except ZkError as e:
            raise ClusterError(f"ZooKeeper {self.client.connect} failed during the "
                               f"registration of broker {self.broker_id}: {e!r}") from e
        self._task = asyncio.ensure_future(self._run())
        return self.broker_epoch

    def _taken_message(self, e: NodeExists) -> str:
        return (f"Error while creating ephemeral at {zkdata.broker_path(self.broker_id)}, "
                f"node already exists and owner '{e.owner}' does not match current session "
                f"'{self.client.session_id}'")

    async def _register(self) -> None:
        assert self._registration is not None
        session = self.client.session_id
        registration = replace(self._registration, timestamp_ms=self.clock.wall_ms())
        path = zkdata.broker_path(self.broker_id)
        self.broker_epoch = await self.client.checked_ephemeral_create(
            path, registration.encode())
        self._registered_session = session
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): "
                 "%d", self.broker_id, path,
                 ",".join(e.connection_string() for e in registration.endpoints),
                 self.broker_epoch)

    # --- running ------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closed:
            event = await self.client.events.get()
            if self._closed:
                return
            if isinstance(event, SessionEvent) and event.state in ("SUSPENDED", "LOST"):
                log.warning("ZooKeeper session %s: %s", "expired" if event.state == "LOST"
                            else "suspended (connection lost)", self.client.connect)
                continue
            if isinstance(event, WatchEvent) and event.path != zkdata.BROKER_IDS:
                continue
            await self._sync()

    async def _sync(self) -> None:
        """Register again if the session is a new one, then refresh the live set; on a
        ZooKeeper error, retry later."""
        try:
            if self.client.session_id != self._registered_session:
                log.info("New ZooKeeper session %#x: registering broker %d again",
                         self.client.session_id, self.broker_id)
                await self._register()
            await self._refresh()
        except NodeExists as e:
            log.error("%s: retrying", self._taken_message(e))
            self._schedule_retry()
        except ZkError as e:
            log.warning("ZooKeeper error (%r): retrying", e)
            self._schedule_retry()
        except Exception:  # the task must outlive any surprise, or membership stops
            log.exception("Cluster membership update failed: retrying")
            self._schedule_retry()
        else:
            self._retry.reset()

    def _schedule_retry(self) -> None:
        self._retry.schedule(self.client.events.put_nowait, _RETRY)

    async def _refresh(self) -> None:
        """Re-read /brokers/ids (re-arming its children watch) and every registration."""
        ids = await self.client.children(zkdata.BROKER_IDS, watch=True)
        found: dict[int, Member] = {}
        for name in ids:
            try:
                data, st = await self.client.get(f"{zkdata.BROKER_IDS}/{name}")
            except NoNode:  # gone meanwhile: the watch fires again
                continue
            try:
                found[int(name)] = Member(zkdata.BrokerRegistration.decode(int(name), data),
                                          st.czxid)
            except (ValueError, KeyError, TypeError) as e:  # not a broker we can reach
                log.warning("Ignoring %s/%s: not a broker registration (%r)",
                            zkdata.BROKER_IDS, name, e)
        before = {i: m.epoch for i, m in self.members.items()}
        self.members.clear()
        self.members.update(sorted(found.items()))
        if before != {i: m.epoch for i, m in self.members.items()}:
            log.info("Live brokers: %s (added %s, removed %s; epochs %s)",
                     sorted(self.members), sorted(set(found) - set(before)),
                     sorted(set(before) - set(found)),
                     {i: m.epoch for i, m in self.members.items()})
            for callback in list(self._listeners):
                callback()

    # --- LiveBrokers (live_brokers.py): the controller shares this watch ---------------

    def live_brokers(self) -> dict[int, zkdata.BrokerRegistration]:
        return {i: m.registration for i, m in self.members.items()}

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    # --- stop ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the session: the registration goes at once."""
        self._closed = True
        self._retry.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.client.close()


# --- the broker's lifecycle (server.py) ---------------------------------------------------

async def join_cluster(config: Any, clock: Clock) -> Membership:
    """Membership for a broker with zookeeper.connect, joined (ClusterError if it cannot):
    the config's cluster.id becomes the cluster's, which a fresh data directory stores."""
    membership = Membership.from_config(config, clock)
    try:
        cluster_id = await membership.join(os.path.abspath(config.data_dir))
        configured = config["cluster.id"]
        if configured and configured != cluster_id:
            raise ClusterError(f"cluster.id {configured} does not match the cluster id "
                               f"{cluster_id} in ZooKeeper ({config['zookeeper.connect']})")
    except BaseException:
        await membership.close()
        raise
    config.set("cluster.id", cluster_id)
    return membership


async def register_listeners(membership: Membership, listeners: Iterable[Any]) -> int:
    """Register the broker with its listeners' advertised endpoints; its epoch."""
    listeners = list(listeners)
    endpoints = [zkdata.Endpoint(ln.name, ln.advertised_host, ln.advertised_port or ln.port)
                 for ln in listeners]
    try:
        return await membership.register(endpoints, {ln.name: ln.protocol for ln in listeners})
    except BaseException:
        await membership.close()
        raise
