# Group-coordinator keys for test_protocol_versions.py (see protocol_cases.py).
#
# One "stable" group is built once per run with raw JoinGroup + SyncGroup at the highest common
# versions (one member, session timeout 60 s so it stays Stable without heartbeats); the
# per-version checks then use it with requests whose answer is deterministic in both of Kafka's
# group coordinators (3.x GroupCoordinator, 4.x GroupCoordinatorService for classic groups):
# - Heartbeat / SyncGroup from the real member of a Stable group: NONE, and SyncGroup hands back
#   the current assignment (GroupCoordinator.handleSyncGroup, case Stable).
# - LeaveGroup for an unknown member: UNKNOWN_MEMBER_ID; from v3 it is per member and the top
#   level is NONE (LeaveGroupResponse folds the member error into the top level below v3).
# - JoinGroup v4+ with an empty member id: MEMBER_ID_REQUIRED and a member id (KIP-394);
#   v0-3 join at once and complete after group.initial.rebalance.delay.ms (3 s by default).
# - OffsetCommit with generation -1 and no member id is the "simple" commit (assign()-mode
#   consumers, offset resets): NONE. v0 (and OffsetFetch v0) stored offsets in ZooKeeper; a KRaft
#   3.x broker answers UNSUPPORTED_VERSION (KafkaApis.commitOffsetsToZookeeper,
#   handleOffsetFetchRequestFromZookeeper: requireZkOrThrow), so both answers are accepted.
# - ListGroups v5 group_type is "classic" for these groups (GroupCoordinatorAdapter.listGroups).
from __future__ import annotations

import struct
from typing import Any

from compat_tests.conftest import unique
from compat_tests.protocol_cases import NONE, UNSUPPORTED_VERSION, Ctx, check
from compat_tests.wire import CLIENT_ID, Conn

MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID = 79, 25
COMMIT_METADATA = "compat-metadata"


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def find_coordinator(ctx: Ctx, group: str) -> None:
    """Make sure the group's coordinator is loaded (creates __consumer_offsets on Kafka)."""
    v = ctx.target.version(10)
    fields = {"key": group, "key_type": 0, "coordinator_keys": [group]}

    def code(r: Any) -> int:
        return r.coordinators[0].error_code if v >= 4 else r.error_code

    resp = ctx.retry_coordinator(lambda: ctx.target.call(10, fields, v), code)
    assert code(resp) == NONE, resp


def join(conn: Conn, v: int, group: str, topic: str, member_id: str = "") -> Any:
    return conn.call(11, v, {
        "group_id": group, "session_timeout_ms": 60000, "rebalance_timeout_ms": 60000,
        "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription([topic])}],
        "reason": None})


def stable_group(ctx: Ctx) -> dict[str, Any]:
    def make() -> dict[str, Any]:
        group, topic = unique("stable"), ctx.data_topic
        find_coordinator(ctx, group)
        jv, sv = ctx.target.version(11), ctx.target.version(14)
        with ctx.target.conn() as c:
            j = ctx.retry_coordinator(lambda: join(c, jv, group, topic), lambda r: r.error_code)
            if j.error_code == MEMBER_ID_REQUIRED:
                j = join(c, jv, group, topic, j.member_id)
            assert j.error_code == NONE and j.leader == j.member_id, j
            assign = assignment(topic, [0])
            s = c.call(14, sv, {"group_id": group, "generation_id": j.generation_id,
                                "member_id": j.member_id, "group_instance_id": None,
                                "protocol_type": "consumer", "protocol_name": "range",
                                "assignments": [{"member_id": j.member_id,
                                                 "assignment": assign}]})
            assert s.error_code == NONE and bytes(s.assignment) == assign, s
        return {"group": group, "member": j.member_id, "generation": j.generation_id,
                "assignment": assign}
    return ctx.once("stable_group", make)


def commit(conn: Conn, v: int, group: str, topic: str, offset: int) -> Any:
    return conn.call(8, v, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "commit_timestamp": -1, "committed_metadata": COMMIT_METADATA}]}]})


def _commit_code(r: Any) -> int:
    return r.topics[0].partitions[0].error_code


def committed_group(ctx: Ctx) -> str:
    """A group holding offset 1 (with metadata) for the data topic's partition 0."""
    def make() -> str:
        group = unique("committed")
        find_coordinator(ctx, group)
        with ctx.target.conn() as c:
            r = ctx.retry_coordinator(lambda: commit(c, ctx.target.version(8), group,
                                                     ctx.data_topic, 1), _commit_code)
        assert _commit_code(r) == NONE, r
        return group
    return ctx.once("committed_group", make)


@check(8)
def offset_commit(ctx: Ctx, conn: Conn, v: int) -> None:
    group = unique("commit")
    find_coordinator(ctx, group)
    # The group's __consumer_offsets partition may still be loading on Kafka after
    # FindCoordinator answered: NOT_COORDINATOR / LOAD_IN_PROGRESS, retried as clients do.
    resp = ctx.retry_coordinator(lambda: commit(conn, v, group, ctx.data_topic, 2), _commit_code)
    tr = resp.topics[0]
    assert tr.name == ctx.data_topic
    code = tr.partitions[0].error_code
    if v == 0 and code == UNSUPPORTED_VERSION:
        return
    assert code == NONE, resp
    # Read it back at the highest version.
    with ctx.target.conn() as c:
        fetched = fetch_offset(c, ctx.target.version(9), group, ctx.data_topic)
    assert fetched == (2, COMMIT_METADATA)


def fetch_offset(conn: Conn, v: int, group: str, topic: str) -> tuple[int, str] | int:
    """(offset, metadata), or the partition's error code when it is not NONE."""
    resp = conn.call(9, v, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                    "topics": [{"name": topic, "partition_indexes": [0]}]}],
        "require_stable": False})
    if v >= 8:
        assert len(resp.groups) == 1 and resp.groups[0].group_id == group, resp
        assert resp.groups[0].error_code == NONE, resp
        topics = resp.groups[0].topics
    else:
        if v >= 2:
            assert resp.error_code == NONE, resp
        topics = resp.topics
    assert [t.name for t in topics] == [topic], resp
    p = topics[0].partitions[0]
    assert p.partition_index == 0
    if p.error_code != NONE:
        return p.error_code
    return p.committed_offset, p.metadata


@check(9)
def offset_fetch(ctx: Ctx, conn: Conn, v: int) -> None:
    got = fetch_offset(conn, v, committed_group(ctx), ctx.data_topic)
    if v == 0 and got == UNSUPPORTED_VERSION:
        return
    if v == 0 and isinstance(got, tuple) and got[0] == -1:
        return  # a ZooKeeper-mode broker reads v0 offsets from ZooKeeper, where none are
    assert got == (1, COMMIT_METADATA)


@check(10)
def find_coordinator_check(ctx: Ctx, conn: Conn, v: int) -> None:
    group = unique("findcoord")
    fields = {"key": group, "key_type": 0, "coordinator_keys": [group]}
    resp = ctx.retry_coordinator(
        lambda: conn.call(10, v, fields),
        lambda r: r.coordinators[0].error_code if v >= 4 else r.error_code)
    if v >= 4:
        assert len(resp.coordinators) == 1, resp
        node = resp.coordinators[0]
        assert node.key == group
    else:
        node = resp
    assert node.error_code == NONE, resp
    assert node.node_id in ctx.brokers and node.host and node.port > 0, resp


@check(11)
def join_group(ctx: Ctx, conn: Conn, v: int) -> None:
    group = unique("join")
    find_coordinator(ctx, group)
    topic = ctx.data_topic
    resp = join(conn, v, group, topic)
    if v >= 4:
        assert resp.error_code == MEMBER_ID_REQUIRED and resp.member_id, resp
        return
    assert resp.error_code == NONE, resp
    assert resp.generation_id >= 1 and resp.member_id and resp.leader == resp.member_id, resp
    assert resp.protocol_name == "range"
    assert [(m.member_id, bytes(m.metadata)) for m in resp.members] == \
        [(resp.member_id, subscription([topic]))]
    # Leave, so the member does not linger for its session timeout.
    conn.call(13, ctx.target.version(13), {
        "group_id": group, "member_id": resp.member_id,
        "members": [{"member_id": resp.member_id, "group_instance_id": None, "reason": None}]})


@check(12)
def heartbeat(ctx: Ctx, conn: Conn, v: int) -> None:
    g = stable_group(ctx)
    resp = conn.call(12, v, {"group_id": g["group"], "generation_id": g["generation"],
                             "member_id": g["member"], "group_instance_id": None})
    assert resp.error_code == NONE, resp


@check(13)
def leave_group(ctx: Ctx, conn: Conn, v: int) -> None:
    g = stable_group(ctx)
    resp = conn.call(13, v, {"group_id": g["group"], "member_id": "compat-nobody",
                             "members": [{"member_id": "compat-nobody",
                                          "group_instance_id": None, "reason": None}]})
    if v >= 3:
        assert resp.error_code == NONE, resp
        assert [(m.member_id, m.error_code) for m in resp.members] == \
            [("compat-nobody", UNKNOWN_MEMBER_ID)], resp
    else:
        assert resp.error_code == UNKNOWN_MEMBER_ID, resp


@check(14)
def sync_group(ctx: Ctx, conn: Conn, v: int) -> None:
    g = stable_group(ctx)
    resp = conn.call(14, v, {"group_id": g["group"], "generation_id": g["generation"],
                             "member_id": g["member"], "group_instance_id": None,
                             "protocol_type": "consumer", "protocol_name": "range",
                             "assignments": []})
    assert resp.error_code == NONE, resp
    assert bytes(resp.assignment) == g["assignment"]
    if v >= 5:
        assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")


@check(15)
def describe_groups(ctx: Ctx, conn: Conn, v: int) -> None:
    g = stable_group(ctx)
    resp = conn.call(15, v, {"groups": [g["group"]], "include_authorized_operations": False})
    assert len(resp.groups) == 1, resp
    d = resp.groups[0]
    assert d.error_code == NONE and d.group_id == g["group"], d
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in d.members] == [g["member"]]
    m = d.members[0]
    assert m.client_id == CLIENT_ID and m.client_host
    assert bytes(m.member_metadata) == subscription([ctx.data_topic])
    assert bytes(m.member_assignment) == g["assignment"]


@check(16)
def list_groups(ctx: Ctx, conn: Conn, v: int) -> None:
    g = stable_group(ctx)
    resp = conn.call(16, v, {"states_filter": [], "types_filter": []})
    assert resp.error_code == NONE, resp
    mine = [x for x in resp.groups if x.group_id == g["group"]]
    assert len(mine) == 1, f"{g['group']} not listed: {resp}"
    assert mine[0].protocol_type == "consumer"
    if v >= 4:
        assert mine[0].group_state == "Stable"
    if v >= 5:
        assert mine[0].group_type.lower() == "classic"
