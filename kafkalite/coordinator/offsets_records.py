# The record schemas of __consumer_offsets, as Kafka writes them (group-coordinator's
# OffsetCommitKey/Value.json and GroupMetadataKey/Value.json), so the log reads the same to
# Kafka's tools. Keys and values start with an int16 schema version:
#   key 0-1  OffsetCommitKey      group, topic, partition
#   key 2    GroupMetadataKey     group
#   OffsetCommitValue   v1: offset, metadata, commitTimestamp, expireTimestamp (only written
#                       when a v2-4 commit set retention_time); v3: offset, leaderEpoch,
#                       metadata, commitTimestamp (what Kafka writes otherwise)
#   GroupMetadataValue  v3: protocolType, generation, protocol?, leader?,
#                       currentStateTimestamp, members[memberId, groupInstanceId?, clientId,
#                       clientHost, rebalanceTimeout, sessionTimeout, subscription, assignment]
# A null value is a tombstone. Non-flexible versions only (v4 values are flexible; Kafka
# still writes v3).
from __future__ import annotations

import struct
from dataclasses import dataclass, field

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_ms: int
    expire_ms: int = -1  # -1: the group's retention applies
    # Base offset of the batch that wrote it (not stored in the record): when a transaction
    # commits, its offset replaces the committed one only if written later, as Kafka's
    # CommitRecordMetadataAndOffset.olderThan decides.
    log_offset: int = field(default=-1, compare=False)


@dataclass(slots=True)
class MemberValue:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_ms: int
    members: list[MemberValue] = field(default_factory=list)


# --- primitives -------------------------------------------------------------------------

def _str(s: str | None) -> bytes:
    if s is None:
        return _H.pack(-1)
    b = s.encode()
    return _H.pack(len(b)) + b


def _bytes(b: bytes) -> bytes:
    return _I.pack(len(b)) + b


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def i16(self) -> int:
        v = _H.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        v = _I.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self) -> int:
        v = _Q.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def str(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise ValueError("string runs past the record")
        s = self.buf[self.pos:end].decode()
        self.pos = end
        return s

    def bytes(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        end = self.pos + n
        if end > len(self.buf):
            raise ValueError("bytes run past the record")
        b = self.buf[self.pos:end]
        self.pos = end
        return bytes(b)


# --- keys -------------------------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _H.pack(1) + _str(group) + _str(topic) + _I.pack(partition)


def group_key(group: str) -> bytes:
    return _H.pack(2) + _str(group)


def parse_key(buf: bytes) -> tuple[str, str, str | None, int]:
    """('offset', group, topic, partition) or ('group', group, None, -1); ValueError if the
    key is of a kind this broker does not know."""
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.str() or "", r.str() or "", r.i32()
        return "offset", group, topic, partition
    if version == 2:
        return "group", r.str() or "", None, -1
    raise ValueError(f"unknown __consumer_offsets key version {version}")


# --- values -----------------------------------------------------------------------------

def offset_value(v: OffsetValue) -> bytes:
    if v.expire_ms >= 0:
        return (_H.pack(1) + _Q.pack(v.offset) + _str(v.metadata) + _Q.pack(v.commit_ms)
                + _Q.pack(v.expire_ms))
    return (_H.pack(3) + _Q.pack(v.offset) + _I.pack(v.leader_epoch) + _str(v.metadata)
            + _Q.pack(v.commit_ms))


def parse_offset_value(buf: bytes) -> OffsetValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unsupported OffsetCommitValue version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.str() or ""
    commit = r.i64()
    expire = r.i64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, commit, expire)


def group_value(v: GroupValue) -> bytes:
    out = [_H.pack(3), _str(v.protocol_type), _I.pack(v.generation), _str(v.protocol),
           _str(v.leader), _Q.pack(v.state_ms), _I.pack(len(v.members))]
    for m in v.members:
        out += [_str(m.member_id), _str(m.instance_id), _str(m.client_id), _str(m.client_host),
                _I.pack(m.rebalance_timeout_ms), _I.pack(m.session_timeout_ms),
                _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(out)


def parse_group_value(buf: bytes) -> GroupValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.str() or ""
    generation = r.i32()
    protocol = r.str()
    leader = r.str()
    state_ms = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.str() or ""
        instance_id = r.str() if version >= 3 else None
        client_id = r.str() or ""
        client_host = r.str() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        rebalance = session if rebalance < 0 else rebalance
        members.append(MemberValue(member_id, instance_id, client_id, client_host, rebalance,
                                   session, r.bytes(), r.bytes()))
    return GroupValue(protocol_type, generation, protocol, leader, state_ms, members)
