# ACL znodes, as Kafka 3.8's ZooKeeper-mode AclAuthorizer stores them (ZkAclStore): paths and
# encodings only, no I/O (cluster/zk_acls.py reads and writes them).
#
# A resource's bindings are one znode: LITERAL under /kafka-acl/<Type>/<name>, the other
# pattern types under /kafka-acl-extended/<pattern, lower case>/<Type>/<name>, <Type> the
# resource type's camel-case name (Topic, TransactionalId). A change is announced by a
# persistent-sequential acl_changes_<seq>: "TOPIC:<name>" under /kafka-acl-changes for a
# LITERAL resource, a JSON object under /kafka-acl-extended-changes for the others. All as
# read back from a Kafka 3.8 broker in ZooKeeper mode (tests/cluster/test_acls_zk_vs_kafka.py).
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .zkdata import _json, _parse

ACL_LITERAL = "/kafka-acl"
ACL_EXTENDED = "/kafka-acl-extended"
ACL_LITERAL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_RESOURCE_DIRS = ("Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User")
ACL_EXTENDED_PATTERNS = ("prefixed",)
ACL_PATHS = (ACL_LITERAL_CHANGES, ACL_EXTENDED_CHANGES,
             *(f"{ACL_LITERAL}/{d}" for d in ACL_RESOURCE_DIRS),
             *(f"{ACL_EXTENDED}/{p}/{d}" for p in ACL_EXTENDED_PATTERNS
               for d in ACL_RESOURCE_DIRS))  # what the authorizer creates at its start


def acl_resource_path(resource_dir: str, pattern: str, name: str) -> str:
    """`pattern` is Kafka's PatternType name (LITERAL, PREFIXED)."""
    if pattern == "LITERAL":
        return f"{ACL_LITERAL}/{resource_dir}/{name}"
    return f"{ACL_EXTENDED}/{pattern.lower()}/{resource_dir}/{name}"


@dataclass(frozen=True)
class AclEntry:
    """One entry of a resource's znode, with Kafka's names: User:alice, Allow, *, Read."""
    principal: str
    permission_type: str
    host: str
    operation: str


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    return _json({"acls": [{"principal": e.principal, "permissionType": e.permission_type,
                            "host": e.host, "operation": e.operation} for e in entries],
                  "version": 1})


def decode_acls(data: bytes | None) -> list[AclEntry]:
    if not data:
        return []
    return [AclEntry(str(a["principal"]), str(a["permissionType"]), str(a["host"]),
                     str(a["operation"])) for a in _parse(data).get("acls") or ()]


def encode_acl_change(resource_type: str, pattern: str, name: str) -> tuple[str, bytes]:
    """(the changes znode to add a sequential child to, its data); `resource_type` is the
    enum name (TOPIC, TRANSACTIONAL_ID)."""
    if pattern == "LITERAL":
        return ACL_LITERAL_CHANGES, f"{resource_type}:{name}".encode()
    return ACL_EXTENDED_CHANGES, _json({"version": 1, "resourceType": resource_type,
                                        "name": name, "patternType": pattern})


def decode_acl_change(changes_path: str, data: bytes) -> tuple[str, str, str]:
    """(resource type enum name, pattern type name, resource name) of a notification."""
    if changes_path == ACL_LITERAL_CHANGES:
        rtype, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"not a resource: {data[:200]!r}")
        return rtype, "LITERAL", name
    d = _parse(data)
    return str(d["resourceType"]), str(d["patternType"]), str(d["name"])
