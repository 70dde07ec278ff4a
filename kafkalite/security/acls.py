# ACL bindings and the authorizer, with Kafka's StandardAuthorizer semantics (KRaft):
# - a binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry
#   (principal, host, operation, ALLOW or DENY);
# - authorize(): a super user is always allowed; otherwise the ACLs whose pattern matches the
#   resource (LITERAL equal name, LITERAL "*", PREFIXED a prefix of the name) decide: the
#   principal must be the caller's or User:*, the host the caller's or "*"; a matching DENY
#   wins; ALLOW on the operation, on ALL, or (ALLOW only) READ/WRITE/DELETE/ALTER for DESCRIBE
#   and ALTER_CONFIGS for DESCRIBE_CONFIGS allows; when no ACL names the resource at all,
#   allow.everyone.if.no.acl.found decides, otherwise the answer is no.
# - filters as Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): ANY matches every value,
#   null names/principals/hosts match any, MATCH matches the patterns that would apply to the
#   named resource; a filter with an UNKNOWN element matches nothing.
# - creation checks in Kafka 3.8's order (AclApis, then AclControlManager): ANY or MATCH in
#   a creation fails the whole request (Kafka's ResourcePattern refuses them while parsing);
#   principals and hosts are not checked, as Kafka 3.8 does not.
# Where the bindings live is the store's (AclStore): by default .kafkalite/acls.json
# (LocalAclStore, written on the metadata worker thread: temp file, fsync, rename; loaded at
# start); in a ZooKeeper cluster Kafka's znodes (cluster/zk_acls.py), which also feeds this
# cache with the other brokers' changes through set_resource(). No network I/O here.
from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Protocol

from ..fileio import atomic_write
from ..log.flusher import metadata_worker
from ..wire.errors import ErrorCode, KafkaError
from .acl_codes import Operation, PatternType, Permission, ResourceType


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
# The kio fields of a creation and of a filter holding the four enum codes.
CREATION_CODES = ("resource_type", "resource_pattern_type", "operation", "permission_type")
FILTER_CODES = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                              Operation.DELETE, Operation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


def _enum(cls: type[IntEnum], code: int) -> IntEnum:
    """Kafka's fromCode: a code it does not know is UNKNOWN."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def of(cls, rtype: int, name: str, ptype: int, principal: str, host: str, op: int,
           perm: int) -> "AclBinding":
        return cls(_enum(ResourceType, rtype), name, _enum(PatternType, ptype), principal,
                   host, _enum(Operation, op), _enum(Permission, perm))

    def as_list(self) -> list:
        return [int(self.resource_type), self.name, int(self.pattern_type), self.principal,
                self.host, int(self.operation), int(self.permission)]


@dataclass(frozen=True)
class AclFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @classmethod
    def of(cls, rtype: int, name: str | None, ptype: int, principal: str | None,
           host: str | None, op: int, perm: int) -> "AclFilter":
        return cls(_enum(ResourceType, rtype), name, _enum(PatternType, ptype), principal,
                   host, _enum(Operation, op), _enum(Permission, perm))

    def pattern_unknown(self) -> bool:
        return (self.resource_type == ResourceType.UNKNOWN
                or self.pattern_type == PatternType.UNKNOWN)

    def entry_unknown(self) -> bool:
        return (self.operation == Operation.UNKNOWN
                or self.permission == Permission.UNKNOWN)

    def matches_resource(self, rtype: ResourceType, ptype: PatternType, name: str) -> bool:
        """Does the filter's pattern part match this resource pattern?"""
        if self.pattern_unknown() or self.entry_unknown():
            return False
        if self.resource_type not in (ResourceType.ANY, rtype):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, ptype):
            return False
        if self.name is not None:
            if self.pattern_type != PatternType.MATCH:
                return self.name == name
            if ptype == PatternType.LITERAL:
                return name in (self.name, WILDCARD)
            return self.name.startswith(name)
        return True

    def one_resource(self) -> tuple[ResourceType, PatternType, str] | None:
        """The one resource pattern the filter names exactly (Kafka's matchesAtMostOne)."""
        if (self.resource_type == ResourceType.ANY or self.name is None
                or self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)):
            return None
        return self.resource_type, self.pattern_type, self.name

    def matches(self, b: AclBinding) -> bool:
        return (self.matches_resource(b.resource_type, b.pattern_type, b.name)
                and (self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (Operation.ANY, b.operation)
                and self.permission in (Permission.ANY, b.permission))


class WholeRequestFailed(Exception):
    """ANY or MATCH in a creation: Kafka fails every creation of the request with
    UNKNOWN_SERVER_ERROR and a null message, creating none."""


def creation_error(b: AclBinding) -> tuple[int, str] | None:
    """(error code, message) for a binding Kafka refuses, None for a valid one."""
    if (b.resource_type == ResourceType.ANY
            or b.pattern_type in (PatternType.ANY, PatternType.MATCH)
            or b.operation == Operation.ANY or b.permission == Permission.ANY):
        raise WholeRequestFailed()
    bad = ErrorCode.invalid_request
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        return bad, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not b.name:
        return bad, "Invalid empty resource name"
    for label, value in (("resourceType", b.resource_type), ("patternType", b.pattern_type),
                         ("operation", b.operation), ("permissionType", b.permission)):
        if value == 0:
            return bad, f"Invalid {label} UNKNOWN"
    return None


def _entry_result(b: AclBinding, principal: str, host: str, op: Operation) -> Permission | None:
    if b.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if b.host != WILDCARD and b.host != host:
        return None
    if b.operation != Operation.ALL:
        if b.permission == Permission.ALLOW:
            if op == Operation.DESCRIBE:
                implied = b.operation in IMPLIES_DESCRIBE
            elif op == Operation.DESCRIBE_CONFIGS:
                implied = b.operation in IMPLIES_DESCRIBE_CONFIGS
            else:
                implied = b.operation == op
            if not implied:
                return None
        elif b.operation != op:
            return None
    return b.permission


ResourceKey = tuple[ResourceType, PatternType, str]


def resource_of(b: AclBinding) -> ResourceKey:
    return b.resource_type, b.pattern_type, b.name


class AclStore(Protocol):
    def load(self) -> list[AclBinding]: ...

    async def change(self, auth: "Authorizer", added: list[AclBinding],
                     removed: set[AclBinding]) -> None:
        """Persist the change and bring `auth`'s cache to it; KafkaError when it failed."""

    async def delete(self, auth: "Authorizer", filters: list["AclFilter"]
                     ) -> list[list[AclBinding]]:
        """Delete what the filters match, as one change: the bindings each one matched."""


class LocalAclStore:
    """The broker's own .kafkalite/acls.json (a single broker, or none: in memory)."""

    def __init__(self, state_dir: str | None):
        self.path = os.path.join(state_dir, "acls.json") if state_dir else None

    def load(self) -> list[AclBinding]:
        if self.path is None or not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            return [AclBinding.of(*item) for item in json.loads(f.read())]

    async def change(self, auth: "Authorizer", added: list[AclBinding],
                     removed: set[AclBinding]) -> None:
        if not auth.apply(added, removed) or self.path is None:
            return
        # Encoded on the loop, written on the worker: it never sees a set being changed.
        data = json.dumps([b.as_list() for b in auth.acls], indent=0).encode()
        await asyncio.wrap_future(metadata_worker().submit(self._write, data))

    async def delete(self, auth: "Authorizer", filters: list[AclFilter]
                     ) -> list[list[AclBinding]]:
        matched = [auth.describe(f) for f in filters]
        await self.change(auth, [], {b for m in matched for b in m})
        return matched

    def _write(self, data: bytes) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        atomic_write(self.path, data)


class Authorizer:
    def __init__(self, state_dir: str | None, super_users: str = "",
                 allow_if_no_acl: bool = False, store: AclStore | None = None):
        self.store: AclStore = store or LocalAclStore(state_dir)
        self.super_users = frozenset(p.strip() for p in (super_users or "").split(";")
                                     if p.strip())
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: dict[AclBinding, None] = {}  # an ordered set, in creation order
        # resource type -> literal name -> bindings, and the PREFIXED bindings, for authorize.
        self._literal: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}

    # --- the cache ----------------------------------------------------------------------------

    def load(self) -> None:
        self.replace_all(self.store.load())

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        self.acls = dict.fromkeys(bindings)
        self._reindex()

    def apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]) -> bool:
        """Add and remove bindings (those present stay where they are): changed or not."""
        before = len(self.acls)
        gone = [b for b in removed if self.acls.pop(b, 0) is None]
        for b in added:
            self.acls.setdefault(b, None)
        changed = bool(gone) or len(self.acls) != before
        if changed:
            self._reindex()
        return changed

    def set_resource(self, key: ResourceKey, bindings: Iterable[AclBinding]) -> None:
        """The resource's bindings are now exactly `bindings` (as its store holds them)."""
        new = dict.fromkeys(bindings)  # the store's order for the ones added
        self.apply(new, [b for b in self.acls if resource_of(b) == key and b not in new])

    def _reindex(self) -> None:
        self._literal, self._prefixed = {}, {}
        for b in self.acls:
            if b.pattern_type == PatternType.LITERAL:
                self._literal.setdefault(b.resource_type, {}).setdefault(b.name, []).append(b)
            else:
                self._prefixed.setdefault(b.resource_type, []).append(b)

    # --- the admin APIs ---------------------------------------------------------------------

    async def create(self, bindings: list[AclBinding]) -> list[tuple[int, str | None]]:
        """(error code, message) per binding, in request order; a binding already present
        succeeds without a second copy."""
        try:
            errors = [creation_error(b) for b in bindings]
        except WholeRequestFailed:
            return [(ErrorCode.unknown_server_error, None)] * len(bindings)
        valid = list(dict.fromkeys(b for b, err in zip(bindings, errors) if err is None))
        if valid:
            try:
                await self.store.change(self, valid, set())
            except KafkaError as e:  # the store could not write: no creation is made
                return [err or (e.code, e.message) for err in errors]
        return [err or (ErrorCode.none, "") for err in errors]

    def describe(self, f: AclFilter) -> list[AclBinding]:
        return [b for b in self.acls if f.matches(b)]

    async def delete(self, filters: list[AclFilter]
                     ) -> list[tuple[int, str | None, list[AclBinding]]]:
        """Per filter: (error code, message, the bindings it matched). Every filter sees the
        bindings present before the request, as Kafka's controller applies them at once."""
        refused: list[tuple[int, str] | None] = [
            (ErrorCode.invalid_request, "Unknown patternFilter.") if f.pattern_unknown() else
            (ErrorCode.invalid_request, "Unknown entryFilter.") if f.entry_unknown() else None
            for f in filters]
        valid = [f for f, r in zip(filters, refused) if r is None]
        try:
            matched = iter(await self.store.delete(self, valid) if valid else ())
        except KafkaError as e:
            return [(*(r or (e.code, e.message)), []) for r in refused]
        return [(*r, []) if r else (ErrorCode.none, None, next(matched)) for r in refused]

    # --- authorization ----------------------------------------------------------------------

    def _candidates(self, rtype: ResourceType, name: str) -> Iterable[AclBinding]:
        literal = self._literal.get(rtype, {})
        yield from literal.get(name, ())
        if name != WILDCARD:
            yield from literal.get(WILDCARD, ())
        for b in self._prefixed.get(rtype, ()):
            if name.startswith(b.name):
                yield b

    def authorize(self, principal: str, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        found = allowed = False
        for b in self._candidates(resource_type, name):
            found = True
            result = _entry_result(b, principal, host, operation)
            if result == Permission.DENY:
                return False
            allowed = allowed or result == Permission.ALLOW
        return allowed or (not found and self.allow_if_no_acl)
