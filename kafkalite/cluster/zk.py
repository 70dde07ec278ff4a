# ZooKeeper for kafkalite's event loop: kazoo (a maintained client with a battle-tested session
# state machine and multi) bridged to asyncio. kazoo does all socket I/O on its own connection
# thread; every call here is kazoo's *_async form, whose result is handed back to the loop with
# call_soon_threadsafe, so the loop never waits on ZooKeeper. Session state changes and watch
# notifications arrive on the same way into `events`, an asyncio.Queue.
#
# On top: Kafka's own ZooKeeper primitives (KafkaZkClient): the chroot created first through a
# chroot-less session, the checked ephemeral create (a broker that restarts inside its old
# session's timeout finds its znode still there, owned by that session), controller election
# with the /controller_epoch bump in one multi, and the controller-epoch fence on every
# controller write.
#
# kazoo is imported only when a client is built: single-node kafkalite does not need it
# (`pip install kafkalite[zookeeper]`).
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import zkdata


RECONNECT_MAX_DELAY_S = 1.0  # the longest wait between two connection attempts


class ZkError(Exception):
    """A ZooKeeper operation failed; `index` is the failing op's position in a multi."""
    index: int | None = None


class NodeExists(ZkError):
    """`owner`: the session holding an ephemeral node (checked_ephemeral_create), else 0."""
    owner: int = 0


class NoNode(ZkError):
    pass


class BadVersion(ZkError):
    pass


class NotEmpty(ZkError):
    pass


class ZkConnectionError(ZkError):
    """Connection loss or session expiry: the outcome of the call is unknown."""


class ControllerMoved(ZkError):
    """The controller epoch fence failed: another broker is (or was elected) controller."""


_ERRORS = {"NodeExistsError": NodeExists, "NoNodeError": NoNode,
           "BadVersionError": BadVersion, "NotEmptyError": NotEmpty,
           "ConnectionLoss": ZkConnectionError, "SessionExpiredError": ZkConnectionError,
           "ConnectionClosedError": ZkConnectionError, "SessionMovedError": ZkConnectionError}


def _translate(exc: BaseException) -> BaseException:
    for cls in type(exc).__mro__:
        if cls.__name__ in _ERRORS:
            err = _ERRORS[cls.__name__](str(exc) or cls.__name__)
            err.__cause__ = exc
            return err
    return exc


@dataclass(frozen=True)
class Stat:
    """The parts of a znode's stat Kafka's layout uses."""
    version: int
    czxid: int
    ephemeral_owner: int
    ctime: int = 0  # creation time (ms, ZooKeeper's clock): notifications expire by it


@dataclass(frozen=True)
class SessionEvent:
    state: str  # "CONNECTED", "SUSPENDED" (connection lost, session maybe alive), "LOST"


@dataclass(frozen=True)
class WatchEvent:
    type: str  # "CREATED", "DELETED", "CHANGED", "CHILD"
    path: str


# The operations of a multi (ZooKeeper's transaction)
@dataclass(frozen=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int = zkdata.MATCH_ANY_VERSION


@dataclass(frozen=True)
class Delete:
    path: str
    version: int = zkdata.MATCH_ANY_VERSION


@dataclass(frozen=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


def split_connect(connect: str) -> tuple[str, str]:
    """"h1:p1,h2:p2/chroot" -> ("h1:p1,h2:p2", "/chroot"); no chroot gives ""."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""


class ZkClient:
    """One ZooKeeper session for the event loop it is started on."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connect_timeout_ms: int | None = None):
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms or session_timeout_ms
        self.events: asyncio.Queue[SessionEvent | WatchEvent] = asyncio.Queue()
        # Further consumers of the same events (the controller, the live-broker watch): each
        # gets every event, as one ZooKeeper session's watches serve the whole broker
        self._subscribers: list[asyncio.Queue[SessionEvent | WatchEvent]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kazoo: Any = None

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Create the chroot if missing, then open the session (bounded by the connect
        timeout). kazoo's blocking start runs in an executor thread."""
        self._loop = asyncio.get_running_loop()
        if self.chroot:
            await self._loop.run_in_executor(None, self._ensure_chroot_blocking)
        self._kazoo = self._new_kazoo(self.hosts + self.chroot)
        self._kazoo.add_listener(self._on_state)
        await self._loop.run_in_executor(None, self._start_blocking, self._kazoo)

    def _new_kazoo(self, hosts: str) -> Any:
        try:
            from kazoo.client import KazooClient
        except ImportError as e:  # pragma: no cover - depends on the installation
            raise RuntimeError("zookeeper.connect needs kazoo: "
                               "pip install 'kafkalite[zookeeper]'") from e
        # kazoo's default reconnection backoff doubles up to an hour: after ZooKeeper has been
        # down a while the broker would come back long after the server, its session expired
        # meanwhile. ZooKeeper's own client (Kafka's) retries within a second.
        retry = {"max_tries": -1, "delay": 0.1, "backoff": 2,
                 "max_delay": min(RECONNECT_MAX_DELAY_S, self.session_timeout_ms / 3000.0)}
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000.0,
                           connection_retry=retry)

    def _start_blocking(self, client: Any) -> None:
        try:
            client.start(timeout=self.connect_timeout_ms / 1000.0)
        except Exception as e:  # kazoo has stopped and closed the client already
            raise ZkConnectionError(f"no ZooKeeper session with {self.hosts}: {e}") from e

    def _ensure_chroot_blocking(self) -> None:
        # Kafka creates its chroot through a session without it (KafkaServer.initZkClient)
        client = self._new_kazoo(self.hosts)
        self._start_blocking(client)
        try:
            client.ensure_path(self.chroot)
        finally:
            client.stop()
            client.close()

    async def close(self) -> None:
        """End the session (its ephemeral znodes go at once) and stop kazoo's threads."""
        if self._kazoo is None:
            return
        kazoo, self._kazoo = self._kazoo, None
        kazoo.remove_listener(self._on_state)

        def stop() -> None:
            kazoo.stop()
            kazoo.close()
        await asyncio.get_running_loop().run_in_executor(None, stop)

    @property
    def connected(self) -> bool:
        """Whether the session is connected now (kazoo's view: an operation started while
        not connected waits for the connection to come back)."""
        return bool(self._kazoo is not None and self._kazoo.connected)

    @property
    def session_id(self) -> int:
        """The current session's id (0 before the first connection)."""
        return self._kazoo.client_id[0] if self._kazoo and self._kazoo.client_id else 0

    # --- the bridge (kazoo's threads -> the loop) ----------------------------------------

    def _to_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # the loop closed meanwhile: nobody waits any more
                pass

    def subscribe(self) -> asyncio.Queue[SessionEvent | WatchEvent]:
        """A queue of its own that receives every later session and watch event."""
        queue: asyncio.Queue[SessionEvent | WatchEvent] = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    def _publish(self, event: SessionEvent | WatchEvent) -> None:  # on the loop
        self.events.put_nowait(event)
        for queue in self._subscribers:
            queue.put_nowait(event)

    def _on_state(self, state: Any) -> None:  # kazoo's thread
        self._to_loop(self._publish, SessionEvent(str(state)))

    def _on_watch(self, event: Any) -> None:  # kazoo's thread
        self._to_loop(self._publish, WatchEvent(str(event.type), event.path))

    def _await(self, async_result: Any) -> asyncio.Future:
        assert self._loop is not None, "start() first"
        fut = self._loop.create_future()

        def settle(value: Any, exc: BaseException | None) -> None:  # on the loop
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(_translate(exc))
            else:
                fut.set_result(value)

        def done(result: Any) -> None:  # kazoo's thread
            exc = result.exception
            self._to_loop(settle, None if exc is not None else result.value, exc)
        async_result.rawlink(done)
        return fut

    # --- operations --------------------------------------------------------------------

    async def get(self, path: str, watch: bool = False) -> tuple[bytes, Stat]:
        data, st = await self._await(self._kazoo.get_async(
            path, watch=self._on_watch if watch else None))
        return data, _stat(st)

    async def exists(self, path: str, watch: bool = False) -> Stat | None:
        st = await self._await(self._kazoo.exists_async(
            path, watch=self._on_watch if watch else None))
        return _stat(st) if st is not None else None

    async def children(self, path: str, watch: bool = False) -> list[str]:
        return list(await self._await(self._kazoo.get_children_async(
            path, watch=self._on_watch if watch else None)))

    async def set(self, path: str, data: bytes,
                  version: int = zkdata.MATCH_ANY_VERSION) -> Stat:
        return _stat(await self._await(self._kazoo.set_async(path, data, version)))

    async def create(self, path: str, data: bytes = b"", ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> str:
        """The created path (with the sequence number for a sequential node)."""
        return await self._await(self._kazoo.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath))

    async def delete(self, path: str, version: int = zkdata.MATCH_ANY_VERSION) -> None:
        await self._await(self._kazoo.delete_async(path, version))

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing parents as empty persistent znodes."""
        await self._await(self._kazoo.ensure_path_async(path))

    async def ensure_persistent_paths(self) -> None:
        """The persistent paths every Kafka broker creates at startup."""
        await asyncio.gather(*(self.ensure_path(p) for p in zkdata.PERSISTENT_PATHS))

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """All of `ops` or none. Raises the failing op's error (its `index` set); else the
        results: the created path, a Stat for a SetData, True for Delete and Check."""
        tx = self._kazoo.transaction()
        for op in ops:
            if isinstance(op, Create):
                tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetData):
                tx.set_data(op.path, op.data, op.version)
            elif isinstance(op, Delete):
                tx.delete(op.path, op.version)
            else:
                tx.check(op.path, op.version)
        results = await self._await(tx.commit_async())
        for index, result in enumerate(results):
            if isinstance(result, Exception) and type(result).__name__ != "RolledBackError":
                err = _translate(result)
                if isinstance(err, ZkError):
                    err.index = index
                raise err
        return [self._strip_chroot(r) if isinstance(r, str) else
                _stat(r) if hasattr(r, "czxid") else r for r in results]

    def _strip_chroot(self, path: str) -> str:
        if self.chroot and path.startswith(self.chroot + "/"):
            return path[len(self.chroot):]
        return path

    # --- Kafka's primitives --------------------------------------------------------------

    async def checked_ephemeral_create(self, path: str, data: bytes) -> int:
        """Create an ephemeral znode; its czxid (a broker's epoch). An existing one owned
        by this very session counts as ours (a retry after a connection loss); owned by
        another session it raises NodeExists."""
        for _ in range(3):  # bounded: a node deleted between create and exists is retried
            try:
                _, st = await self._await(self._kazoo.create_async(
                    path, data, ephemeral=True, include_data=True))
                return st.czxid
            except NodeExists:
                owned = await self.exists(path)
                if owned is None:
                    continue
                if owned.ephemeral_owner == self.session_id:
                    return owned.czxid
                err = NodeExists(f"{path} is held by session {owned.ephemeral_owner:#x}")
                err.owner = owned.ephemeral_owner
                raise err from None
        raise ZkConnectionError(f"{path}: could not create it in 3 attempts")

    async def read_controller_epoch(self) -> tuple[int, int]:
        """(epoch, zk version) of /controller_epoch, created at (0, 0) when missing."""
        try:
            data, st = await self.get(zkdata.CONTROLLER_EPOCH)
            return zkdata.decode_controller_epoch(data), st.version
        except NoNode:
            pass
        try:
            await self.create(zkdata.CONTROLLER_EPOCH, zkdata.encode_controller_epoch(
                zkdata.INITIAL_CONTROLLER_EPOCH))
            return zkdata.INITIAL_CONTROLLER_EPOCH, zkdata.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExists:
            data, st = await self.get(zkdata.CONTROLLER_EPOCH)
            return zkdata.decode_controller_epoch(data), st.version

    async def elect_controller(self, broker_id: int, now_ms: int) -> tuple[int, int]:
        """Become controller (Kafka's registerControllerAndIncrementControllerEpoch): create
        the ephemeral /controller and bump /controller_epoch in one multi. Returns the new
        (epoch, zk version): that version fences every write of this controller
        (multi_fenced). Raises ControllerMoved when another broker won."""
        epoch, version = await self.read_controller_epoch()
        new_epoch = epoch + 1
        registration = zkdata.ControllerRegistration(broker_id, now_ms).encode()
        try:
            _, st = await self.multi([
                Create(zkdata.CONTROLLER, registration, ephemeral=True),
                SetData(zkdata.CONTROLLER_EPOCH, zkdata.encode_controller_epoch(new_epoch),
                        version)])
            return new_epoch, st.version
        except (NodeExists, BadVersion, ZkConnectionError) as e:
            # A retry after a lost connection may find our own earlier multi committed
            try:
                data, cst = await self.get(zkdata.CONTROLLER)
                edata, est = await self.get(zkdata.CONTROLLER_EPOCH)
            except NoNode:
                raise ControllerMoved("the controller changed during the election") from e
            if (zkdata.ControllerRegistration.decode(data).broker_id == broker_id
                    and cst.ephemeral_owner == self.session_id
                    and zkdata.decode_controller_epoch(edata) == new_epoch):
                return new_epoch, est.version
            raise ControllerMoved(f"controller is broker "
                                  f"{zkdata.ControllerRegistration.decode(data).broker_id}, "
                                  f"epoch {zkdata.decode_controller_epoch(edata)}") from e

    async def multi_fenced(self, ops: Sequence[Op], controller_epoch_version: int) -> list[Any]:
        """`ops` only while /controller_epoch is still at the version this controller set
        (Kafka's wrapRequestWithControllerEpochCheck): a deposed controller's writes fail
        with ControllerMoved. Results as multi's, without the check's."""
        try:
            return (await self.multi([Check(zkdata.CONTROLLER_EPOCH, controller_epoch_version),
                                      *ops]))[1:]
        except ZkError as e:
            if e.index == 0 and isinstance(e, (BadVersion, NoNode)):
                raise ControllerMoved("/controller_epoch moved on: no longer controller") from e
            if e.index is not None:  # every error's index counts the caller's ops only
                e.index -= 1
            raise


def _stat(st: Any) -> Stat:
    return Stat(st.version, st.czxid, st.ephemeralOwner, st.ctime)
