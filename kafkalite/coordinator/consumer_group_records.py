# The KIP-848 records of __consumer_offsets, laid out as Kafka's group coordinator writes them
# (group-coordinator's ConsumerGroup*Key/Value.json), so the log reads the same to Kafka:
#   key 3  ConsumerGroupMetadata               group         value: epoch
#   key 4  ConsumerGroupPartitionMetadata      group         value: epoch, topics[id, name,
#                                                            numPartitions, partitionRacks[]]
#   key 5  ConsumerGroupMemberMetadata         group, member value: instanceId?, rackId?,
#          clientId, clientHost, subscribedTopicNames[], subscribedTopicRegex?,
#          rebalanceTimeoutMs, serverAssignor?, tag 0: classicMemberMetadata? (a classic
#          member's sessionTimeoutMs and supportedProtocols[name, metadata])
#   key 6  ConsumerGroupTargetAssignmentMetadata group       value: assignmentEpoch
#   key 7  ConsumerGroupTargetAssignmentMember group, member value: topicPartitions[id, parts]
#   key 8  ConsumerGroupCurrentMemberAssignment group, member value: memberEpoch,
#          previousMemberEpoch, state (int8), assigned[id, parts], pendingRevocation[id, parts]
# Keys are non-flexible (int16 key version, then int16-length strings); values are version 0
# of flexible messages (int16 version, compact strings and arrays, uuids, tagged fields).
# Other tagged fields (Kafka 4.x additions) are read past and never written. Topics travel by id:
# `ids` maps a name to its uuid on the way out, `names` an id back on the way in (a topic
# gone since is dropped from what is read back).
from __future__ import annotations

import struct
import uuid
from typing import Callable, Iterable

from ..wire.primitives import read_uvarint, string, uvarint as _uvarint
from .consumer_assignors import Assignment
from .consumer_group import ClassicInfo, ConsumerGroup, ConsumerMember, MemberState

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_B = struct.Struct(">b")
GROUP, PARTITIONS, MEMBER, TARGET, TARGET_MEMBER, CURRENT = 3, 4, 5, 6, 7, 8
KINDS = frozenset(range(GROUP, CURRENT + 1))
# Kafka's MemberState byte values.
STATE_BYTE = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
              MemberState.UNRELEASED_PARTITIONS: 2}
BYTE_STATE = {v: k for k, v in STATE_BYTE.items()}
Ids = Callable[[str], "uuid.UUID | None"]
Names = Callable[[uuid.UUID], "str | None"]


# --- keys -------------------------------------------------------------------------------

def _kstr(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    out = _H.pack(kind) + _kstr(group_id)
    return out + _kstr(member_id) if member_id is not None else out


def parse_key(buf: bytes, kinds: frozenset[int] = KINDS,
              member_kinds: tuple[int, ...] = (MEMBER, TARGET_MEMBER, CURRENT)
              ) -> tuple[int, str, str | None]:
    """(kind, group id, member id or None); ValueError for key versions not in `kinds`
    (share groups' records have the same key layout, with their own versions)."""
    kind = _H.unpack_from(buf, 0)[0]
    if kind not in kinds:
        raise ValueError(f"not a {'consumer' if kinds is KINDS else 'share'} group key: "
                         f"version {kind}")
    pos = 2
    parts: list[str] = []
    while pos < len(buf) and len(parts) < 2:
        n = _H.unpack_from(buf, pos)[0]
        parts.append(buf[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    member = parts[1] if kind in member_kinds else None
    return kind, parts[0], member


# --- flexible values --------------------------------------------------------------------

def _cstr(s: str | None) -> bytes:
    return string(s, True)


def _topics(a: Assignment, ids: Ids) -> bytes:
    rows = []
    for t in sorted(a):
        tid = ids(t)
        if tid is None or not a[t]:
            continue
        ps = sorted(a[t])
        rows.append(tid.bytes + _uvarint(len(ps) + 1) + b"".join(_I.pack(p) for p in ps)
                    + b"\x00")
    return _uvarint(len(rows) + 1) + b"".join(rows)


_V0, _NO_TAGS = _H.pack(0), b"\x00"


def group_value(epoch: int) -> bytes:
    return _V0 + _I.pack(epoch) + _NO_TAGS


def partitions_value(epoch: int, metadata: dict[str, int], ids: Ids) -> bytes:
    rows = [tid.bytes + _cstr(t) + _I.pack(n) + b"\x01" + _NO_TAGS  # no rack data
            for t, n in sorted(metadata.items()) if (tid := ids(t)) is not None]
    return _V0 + _I.pack(epoch) + _uvarint(len(rows) + 1) + b"".join(rows) + _NO_TAGS


def member_value(m: ConsumerMember) -> bytes:
    names = b"".join(_cstr(n) for n in m.subscribed_names)
    return (_V0 + _cstr(m.instance_id) + _cstr(m.rack_id) + _cstr(m.client_id)
            + _cstr(m.client_host) + _uvarint(len(m.subscribed_names) + 1) + names
            + _cstr(m.subscribed_regex) + _I.pack(m.rebalance_timeout_ms)
            + _cstr(m.server_assignor) + _classic_tag(m.classic))


def _classic_tag(c: ClassicInfo | None) -> bytes:
    """The tagged fields of a member value: ClassicMemberMetadata (tag 0) for a classic
    member, a nullable struct (its presence byte counted in the size)."""
    if c is None:
        return _NO_TAGS
    rows = b"".join(_cstr(name) + _uvarint(len(meta) + 1) + meta + _NO_TAGS
                    for name, meta in c.protocols)
    body = (_I.pack(c.session_timeout_ms) + _uvarint(len(c.protocols) + 1) + rows
            + _NO_TAGS)
    return _uvarint(1) + _uvarint(0) + _uvarint(len(body) + 1) + b"\x01" + body


def target_value(epoch: int) -> bytes:
    return _V0 + _I.pack(epoch) + _NO_TAGS


def target_member_value(a: Assignment, ids: Ids) -> bytes:
    return _V0 + _topics(a, ids) + _NO_TAGS


def current_value(m: ConsumerMember, ids: Ids) -> bytes:
    return (_V0 + _I.pack(m.epoch) + _I.pack(m.previous_epoch)
            + _B.pack(STATE_BYTE[m.state]) + _topics(m.assigned, ids)
            + _topics(m.revoking, ids) + _NO_TAGS)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 2  # past the value version

    def fixed(self, s: struct.Struct) -> int:
        v = s.unpack_from(self.buf, self.pos)[0]
        self.pos += s.size
        return v

    def uvarint(self) -> int:
        n, self.pos = read_uvarint(self.buf, self.pos)
        return n

    def str(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def uuid(self) -> uuid.UUID:
        u = uuid.UUID(bytes=bytes(self.buf[self.pos:self.pos + 16]))
        self.pos += 16
        return u

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def topics(self, names: Names) -> Assignment:
        out: dict[str, frozenset[int]] = {}
        for _ in range(self.uvarint() - 1):
            name = names(self.uuid())
            ps = frozenset(self.fixed(_I) for _ in range(self.uvarint() - 1))
            self.tags()
            if name is not None and ps:
                out[name] = ps
        return out


def parse_epoch(buf: bytes) -> int:
    """The epoch of a group (3) or target assignment metadata (6) value."""
    return _Reader(buf).fixed(_I)


def parse_partitions(buf: bytes, names: Names, epoch: bool = True) -> dict[str, int]:
    """Topic name -> partition count of a key 4 value (or, with epoch=False, of a share
    group's key 9 value: the same topics array, no epoch before it)."""
    r = _Reader(buf)
    if epoch:
        r.fixed(_I)
    out = {}
    for _ in range(r.uvarint() - 1):
        tid, _name, n = r.uuid(), r.str(), r.fixed(_I)
        for _ in range(r.uvarint() - 1):  # partition racks
            r.fixed(_I)
            for _ in range(r.uvarint() - 1):
                r.str()
            r.tags()
        r.tags()
        name = names(tid)
        if name is not None:
            out[name] = n
    return out


def parse_member(buf: bytes, member_id: str, into: ConsumerMember | None = None
                 ) -> ConsumerMember:
    r = _Reader(buf)
    m = into if into is not None else ConsumerMember(member_id)
    m.instance_id, m.rack_id = r.str(), r.str()
    m.client_id, m.client_host = r.str() or "", r.str() or ""
    m.subscribed_names = tuple(r.str() or "" for _ in range(r.uvarint() - 1))
    m.subscribed_regex = r.str()
    m.rebalance_timeout_ms = r.fixed(_I)
    m.server_assignor = r.str()
    m.classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0 and size > 0 and r.fixed(_B) >= 0:
            session_ms = r.fixed(_I)
            protocols = []
            for _ in range(r.uvarint() - 1):
                name = r.str() or ""
                n = r.uvarint() - 1
                protocols.append((name, bytes(r.buf[r.pos:r.pos + n])))
                r.pos += n
                r.tags()
            m.classic = ClassicInfo(session_ms, protocols)
        r.pos = end
    return m


def parse_target_member(buf: bytes, names: Names) -> Assignment:
    return _Reader(buf).topics(names)


def parse_current(buf: bytes, m: ConsumerMember, names: Names) -> None:
    r = _Reader(buf)
    m.epoch, m.previous_epoch = r.fixed(_I), r.fixed(_I)
    m.state = BYTE_STATE.get(r.fixed(_B), MemberState.STABLE)
    m.assigned, m.revoking = r.topics(names), r.topics(names)


# --- whole groups -----------------------------------------------------------------------

def group_records(g: ConsumerGroup, ids: Ids) -> dict[bytes, bytes]:
    """Every live record of a group, by key (what a snapshot of the group writes)."""
    gid = g.group_id
    out = {key(GROUP, gid): group_value(g.epoch),
           key(PARTITIONS, gid): partitions_value(g.epoch, g.subscription_metadata, ids),
           key(TARGET, gid): target_value(g.assignment_epoch)}
    for mid, m in g.members.items():
        out[key(MEMBER, gid, mid)] = member_value(m)
        out[key(CURRENT, gid, mid)] = current_value(m, ids)
    for mid, a in g.target.items():
        out[key(TARGET_MEMBER, gid, mid)] = target_member_value(a, ids)
    return out


def member_keys(group_id: str, member_id: str) -> Iterable[bytes]:
    """A leaving member's keys, in the order Kafka tombstones them."""
    return (key(CURRENT, group_id, member_id), key(TARGET_MEMBER, group_id, member_id),
            key(MEMBER, group_id, member_id))


def group_keys(group_id: str) -> Iterable[bytes]:
    """A deleted group's own keys, in the order Kafka tombstones them."""
    return (key(TARGET, group_id), key(PARTITIONS, group_id), key(GROUP, group_id))
