# ACLs in ZooKeeper (issue 17), as Kafka 3.8's ZooKeeper-mode AclAuthorizer keeps them, so
# that an ACL created or deleted through any broker is enforced by every broker.
# - Layout and encodings: acl_znodes.py (ACL_*): one znode per resource pattern holding its entries,
#   a persistent-sequential notification per changed resource.
# - Writing (AclAuthorizer.updateResourceAcls): per resource, read the znode and its version,
#   add or remove the entries, write it back conditionally on that version (create when
#   missing, delete when no entry is left); a conflict (another broker wrote meanwhile) reads
#   again after a pause (100-150 ms), up to MAX_UPDATE_RETRIES; then the notification, then
#   this broker's cache takes what was written. The answer goes back after the write; a
#   ZooKeeper failure is UNKNOWN_SERVER_ERROR.
# - Following (ZkNodeChangeNotificationListener): at start the broker loads every resource's
#   znode, then follows both notification znodes; each notification re-reads the named
#   resource's znode into the cache. Old notifications are purged (cluster/notifications.py).
#   DescribeAcls answers from the cache: eventually consistent, as Kafka's.
# The authorizer's cache and authorize path (security/acls.py) are the single broker's.
from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Callable

from ..security.acls import (AclBinding, AclFilter, Authorizer, Operation, PatternType, Permission,
                             ResourceKey, ResourceType, resource_of)
from ..wire.errors import ErrorCode, KafkaError
from . import acl_znodes as znodes
from .notifications import NotificationFollower
from .zk import BadVersion, NodeExists, NoNode, ZkClient, ZkError

log = logging.getLogger("kafkalite.cluster")

MAX_UPDATE_RETRIES = 10  # AclAuthorizer's maxUpdateRetries
RETRY_BACKOFF_MS, RETRY_BACKOFF_JITTER_MS = 100, 50  # its pause before reading again


def _camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_"))


# Kafka's names in the znodes: Topic / TransactionalId, Read / AlterConfigs, Allow / Deny.
_DIRS = {t: _camel(t.name) for t in ResourceType if t > ResourceType.ANY}
_TYPE_OF_DIR = {d: t for t, d in _DIRS.items()}
_OPS = {o: _camel(o.name) for o in Operation if o > Operation.ANY}
_OP_OF = {n.lower(): o for o, n in _OPS.items()}
_PERMS = {p: _camel(p.name) for p in (Permission.ALLOW, Permission.DENY)}
_PERM_OF = {n.lower(): p for p, n in _PERMS.items()}


def resource_path(key: ResourceKey) -> str:
    rtype, ptype, name = key
    return znodes.acl_resource_path(_DIRS[rtype], ptype.name, name)


def entry_of(b: AclBinding) -> znodes.AclEntry:
    return znodes.AclEntry(b.principal, _PERMS[b.permission], b.host, _OPS[b.operation])


def binding_of(key: ResourceKey, e: znodes.AclEntry) -> AclBinding:
    rtype, ptype, name = key
    # Kafka reads its names case-insensitively (SecurityUtils.operation / permissionType)
    op = _OP_OF.get(e.operation.replace("_", "").lower(), Operation.UNKNOWN)
    perm = _PERM_OF.get(e.permission_type.lower(), Permission.UNKNOWN)
    return AclBinding(rtype, name, ptype, e.principal, e.host, op, perm)


async def read_resource(zk: ZkClient, key: ResourceKey
                        ) -> tuple[list[znodes.AclEntry], int | None]:
    """The resource's entries and its znode's version (None: no znode)."""
    try:
        data, st = await zk.get(resource_path(key))
    except NoNode:
        return [], None
    return znodes.decode_acls(data), st.version


async def update_resource(zk: ZkClient, key: ResourceKey,
                          modify: Callable[[list[znodes.AclEntry]], list[znodes.AclEntry]]
                          ) -> list[znodes.AclEntry]:
    """Read-modify-write of one resource's znode, conditional on its version (`modify` may
    run more than once); announces a change. The entries now stored."""
    path = resource_path(key)
    for _ in range(MAX_UPDATE_RETRIES):
        current, version = await read_resource(zk, key)
        new = modify(current)
        if new == current:
            return current
        try:
            if version is None:
                await zk.create(path, znodes.encode_acls(new), makepath=True)
            elif not new:
                await zk.delete(path, version=version)
            else:
                await zk.set(path, znodes.encode_acls(new), version=version)
        except (BadVersion, NodeExists, NoNode):  # written meanwhile by another broker
            await asyncio.sleep((RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS))
                                / 1000)
            continue
        parent, data = znodes.encode_acl_change(key[0].name, key[1].name, key[2])
        await zk.create(f"{parent}/{znodes.ACL_CHANGE_PREFIX}", data, sequence=True,
                        makepath=True)
        return new
    raise KafkaError(ErrorCode.unknown_server_error,
                     f"Failed to update ACLs for {path} after trying a maximum of "
                     f"{MAX_UPDATE_RETRIES} times")


async def read_all(zk: ZkClient) -> list[AclBinding]:
    """Every binding in ZooKeeper (AclAuthorizer.loadCache)."""
    keys: list[ResourceKey] = []
    for pattern in [PatternType.LITERAL, *(PatternType[p.upper()] for p in await _children(
            zk, znodes.ACL_EXTENDED) if p.upper() in PatternType.__members__)]:
        base = (znodes.ACL_LITERAL if pattern == PatternType.LITERAL
                else f"{znodes.ACL_EXTENDED}/{pattern.name.lower()}")
        for d in await _children(zk, base):
            if d in _TYPE_OF_DIR:
                keys += [(_TYPE_OF_DIR[d], pattern, n) for n in await _children(zk, f"{base}/{d}")]
    found = await asyncio.gather(*(read_resource(zk, k) for k in keys))
    return [binding_of(k, e) for k, (entries, _) in zip(keys, found) for e in entries]


async def _children(zk: ZkClient, path: str) -> list[str]:
    try:
        return sorted(await zk.children(path))
    except NoNode:
        return []


class ZkAclStore:
    """The authorizer's store in a ZooKeeper cluster."""

    def __init__(self, zk: ZkClient):
        self.zk = zk

    def load(self) -> list[AclBinding]:
        return []  # loaded asynchronously by start_zk_acls, before the broker serves

    async def change(self, auth: Authorizer, added: list[AclBinding],
                     removed: set[AclBinding]) -> None:
        by_key: dict[ResourceKey, tuple[list[AclBinding], list[AclBinding]]] = {}
        for b in added:
            by_key.setdefault(resource_of(b), ([], []))[0].append(b)
        for b in removed:
            by_key.setdefault(resource_of(b), ([], []))[1].append(b)
        for key, (add, remove) in by_key.items():
            gone = set(map(entry_of, remove))
            new = [entry_of(b) for b in add]
            await self._update(auth, key, lambda current: [e for e in current if e not in gone]
                               + [e for e in dict.fromkeys(new) if e not in current])

    async def delete(self, auth: Authorizer, filters: list[AclFilter]
                     ) -> list[list[AclBinding]]:
        """As AclAuthorizer.deleteAcls: the resources in the cache and those a filter names
        exactly, each filter applied to what the znode holds when it is rewritten."""
        keys = dict.fromkeys(resource_of(b) for b in auth.acls)
        keys.update(dict.fromkeys(k for f in filters if (k := f.one_resource()) is not None))
        matched: list[list[AclBinding]] = [[] for _ in filters]
        for key in keys:
            if not any(f.matches_resource(*key) for f in filters):
                continue
            found: list[list[AclBinding]] = []

            def drop(current: list[znodes.AclEntry], key: ResourceKey = key
                     ) -> list[znodes.AclEntry]:
                found[:] = [[b for b in (binding_of(key, e) for e in current) if f.matches(b)]
                            for f in filters]
                gone = {entry_of(b) for m in found for b in m}
                return [e for e in current if e not in gone]
            await self._update(auth, key, drop)
            for into, m in zip(matched, found):
                into += m
        return matched

    async def _update(self, auth: Authorizer, key: ResourceKey,
                      modify: Callable[[list[znodes.AclEntry]], list[znodes.AclEntry]]) -> None:
        try:
            stored = await update_resource(self.zk, key, modify)
        except ZkError as e:
            raise KafkaError(ErrorCode.unknown_server_error, f"ZooKeeper: {e!r}") from None
        auth.set_resource(key, (binding_of(key, e) for e in stored))


class AclChanges(NotificationFollower):
    """Re-reads each announced resource into the authorizer's cache."""
    prefix = znodes.ACL_CHANGE_PREFIX
    log = log

    def __init__(self, path: str, auth: Authorizer, zk: ZkClient, clock: Any):
        super().__init__(zk, clock)
        self.path = path
        self.auth = auth

    async def process(self, data: bytes) -> None:
        try:
            rtype, ptype, name = znodes.decode_acl_change(self.path, data)
            key = (ResourceType[rtype], PatternType[ptype], name)
        except (ValueError, KeyError):
            log.warning("Ignoring ACL change notification %r", data[:200])
            return
        entries, _ = await read_resource(self.zk, key)
        self.auth.set_resource(key, (binding_of(key, e) for e in entries))


class ZkAcls:
    """The store and the two followers of one broker."""

    def __init__(self, auth: Authorizer, zk: ZkClient, clock: Any):
        self.auth = auth
        self.followers = [AclChanges(p, auth, zk, clock) for p in
                          (znodes.ACL_LITERAL_CHANGES, znodes.ACL_EXTENDED_CHANGES)]
        self.zk = zk

    async def start(self) -> None:
        await asyncio.gather(*(self.zk.ensure_path(p) for p in znodes.ACL_PATHS))
        self.auth.store = ZkAclStore(self.zk)
        self.auth.replace_all(await read_all(self.zk))
        for f in self.followers:
            f.follow(first_refresh=True)

    async def stop(self) -> None:
        for f in self.followers:
            await f.stop()


async def start_zk_acls(broker: Any, zk: ZkClient, clock: Any) -> ZkAcls | None:
    """In a cluster with an authorizer: its ACLs from ZooKeeper from now on (None without)."""
    if broker.authorizer is None:
        return None
    if broker.authorizer.acls:
        log.warning("Not using the %d ACL bindings of .kafkalite/acls.json: a cluster's ACLs "
                    "live in ZooKeeper", len(broker.authorizer.acls))
    acls = ZkAcls(broker.authorizer, zk, clock)
    await acls.start()
    log.info("Loaded %d ACL bindings from ZooKeeper", len(broker.authorizer.acls))
    return acls
