# Diff cases for the consumer-group keys (8-16, 42, 47); see catalogue.py. Groups are created
# per case and version under the same name on both brokers.
from __future__ import annotations

from typing import Any

from compat_tests.diff.catalogue import case, sort_by, unique
from compat_tests.diff.conftest import DATA_TOPIC, GROUP, Side, ready_coordinator
from compat_tests.protocol_cases_groups import assignment, subscription


def commit(s: Side, v: int, group: str, generation: int = -1, member: str = "",
           partition: int = 0, topic: str = DATA_TOPIC) -> Any:
    return s.call(8, v, {"group_id": group, "generation_id_or_member_epoch": generation,
                         "member_id": member, "group_instance_id": None,
                         "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                             {"partition_index": partition, "committed_offset": 1,
                              "committed_leader_epoch": -1, "commit_timestamp": -1,
                              "committed_metadata": "meta"}]}]})


@case("offset-commit-simple", 8)
def _(s: Side, v: int) -> Any:
    group = unique("commit", v)
    ready_coordinator(s, group)
    return commit(s, v, group)


@case("offset-commit-unknown-member", 8, versions=lambda v: v >= 1)
def _(s: Side, v: int) -> Any:
    group = unique("commit-member", v)
    ready_coordinator(s, group)
    return commit(s, v, group, generation=3, member="nobody")


@case("offset-commit-unknown-topic", 8)
def _(s: Side, v: int) -> Any:
    return commit(s, v, GROUP, topic="diff-no-such-topic")


def offset_fetch(s: Side, v: int, group: str, topics: list[str] | None) -> Any:
    parts = None if topics is None else [{"name": t, "partition_indexes": [0, 1]}
                                         for t in topics]
    return s.call(9, v, {"group_id": group, "topics": parts, "require_stable": False,
                         "groups": [{"group_id": group, "member_id": None,
                                     "member_epoch": -1, "topics": parts}]})


@case("offset-fetch", 9)
def _(s: Side, v: int) -> Any:
    return offset_fetch(s, v, GROUP, [DATA_TOPIC])


@case("offset-fetch-all", 9, versions=lambda v: v >= 2)
def _(s: Side, v: int) -> Any:
    return offset_fetch(s, v, GROUP, None)


@case("offset-fetch-unknown-group", 9)
def _(s: Side, v: int) -> Any:
    return offset_fetch(s, v, "diff-no-such-group", [DATA_TOPIC, "diff-no-such-topic"])


@case("find-coordinator", 10)
def _(s: Side, v: int) -> Any:
    return s.call(10, v, {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]})


@case("find-coordinator-transaction", 10, versions=lambda v: v >= 1,
      deliberate="kafkalite creates __transaction_state synchronously and answers at once; "
                 "Kafka answers COORDINATOR_NOT_AVAILABLE until the topic it creates is "
                 "loaded (clients retry), as with __consumer_offsets")
def _(s: Side, v: int) -> Any:
    return s.call(10, v, {"key": "diff-txn", "key_type": 1, "coordinator_keys": ["diff-txn"]})


@case("find-coordinator-bad-key-type", 10, versions=lambda v: v >= 1)
def _(s: Side, v: int) -> Any:
    return s.call(10, v, {"key": GROUP, "key_type": 9, "coordinator_keys": [GROUP]})


def join(s: Side, v: int, group: str, member: str = "", protocol_type: str = "consumer") -> Any:
    with s.conn() as c:
        return c.call(11, v, {
            "group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
            "member_id": member, "group_instance_id": None, "protocol_type": protocol_type,
            "protocols": [{"name": "range", "metadata": subscription([DATA_TOPIC])}],
            "reason": None})


def joined(s: Side, v: int, group: str) -> Any:
    ready_coordinator(s, group)
    j = join(s, v, group)
    if j.error_code == 79:  # MEMBER_ID_REQUIRED (v4+): join again with the given id
        j = join(s, v, group, j.member_id)
    return j


@case("join-group", 11)
def _(s: Side, v: int) -> Any:
    return joined(s, v, unique("join", v))


@case("join-group-member-id-required", 11, versions=lambda v: v >= 4)
def _(s: Side, v: int) -> Any:
    group = unique("join-req", v)
    ready_coordinator(s, group)
    return join(s, v, group)


@case("join-group-unknown-member", 11)
def _(s: Side, v: int) -> Any:
    group = unique("join-unk", v)
    ready_coordinator(s, group)
    return join(s, v, group, member="nobody")


@case("join-group-inconsistent-protocol", 11)
def _(s: Side, v: int) -> Any:
    group = unique("join-proto", v)
    joined(s, 5, group)
    return join(s, v, group, protocol_type="connect")


def synced(s: Side, v: int, group: str, generation_delta: int = 0) -> tuple[Any, Any]:
    j = joined(s, 5, group)
    with s.conn() as c:
        r = c.call(14, v, {"group_id": group, "generation_id": j.generation_id + generation_delta,
                           "member_id": j.member_id, "group_instance_id": None,
                           "protocol_type": "consumer", "protocol_name": "range",
                           "assignments": [{"member_id": j.member_id,
                                            "assignment": assignment(DATA_TOPIC, [0])}]})
    return j, r


@case("sync-group", 14)
def _(s: Side, v: int) -> Any:
    return synced(s, v, unique("sync", v))[1]


@case("sync-group-wrong-generation", 14)
def _(s: Side, v: int) -> Any:
    return synced(s, v, unique("sync-gen", v), generation_delta=5)[1]


@case("sync-group-unknown-group", 14)
def _(s: Side, v: int) -> Any:
    return s.call(14, v, {"group_id": "diff-no-such-group", "generation_id": 1,
                          "member_id": "nobody", "group_instance_id": None,
                          "protocol_type": "consumer", "protocol_name": "range",
                          "assignments": []})


@case("heartbeat", 12)
def _(s: Side, v: int) -> Any:
    group = unique("hb", v)
    j, _r = synced(s, 5, group)
    return s.call(12, v, {"group_id": group, "generation_id": j.generation_id,
                          "member_id": j.member_id, "group_instance_id": None})


@case("heartbeat-wrong-generation", 12)
def _(s: Side, v: int) -> Any:
    group = unique("hb-gen", v)
    j, _r = synced(s, 5, group)
    return s.call(12, v, {"group_id": group, "generation_id": j.generation_id + 1,
                          "member_id": j.member_id, "group_instance_id": None})


@case("heartbeat-unknown-member", 12)
def _(s: Side, v: int) -> Any:
    group = unique("hb-mem", v)
    j, _r = synced(s, 5, group)
    return s.call(12, v, {"group_id": group, "generation_id": j.generation_id,
                          "member_id": "nobody", "group_instance_id": None})


@case("leave-group", 13)
def _(s: Side, v: int) -> Any:
    group = unique("leave", v)
    j, _r = synced(s, 5, group)
    return s.call(13, v, {"group_id": group, "member_id": j.member_id,
                          "members": [{"member_id": j.member_id, "group_instance_id": None,
                                       "reason": None}]})


@case("leave-group-unknown-member", 13)
def _(s: Side, v: int) -> Any:
    group = unique("leave-unk", v)
    synced(s, 5, group)
    return s.call(13, v, {"group_id": group, "member_id": "nobody",
                          "members": [{"member_id": "nobody", "group_instance_id": None,
                                       "reason": None}]})


@case("describe-groups", 15)
def _(s: Side, v: int) -> Any:
    group = unique("describe", v)
    synced(s, 5, group)
    return s.call(15, v, {"groups": [group, GROUP, "diff-no-such-group"],
                          "include_authorized_operations": False})


@case("list-groups", 16)
def _(s: Side, v: int) -> Any:
    r = s.call(16, v, {"states_filter": ["Empty"], "types_filter": []})
    # Group order in ListGroups follows each broker's hash maps; compare them sorted.
    r.groups.sort(key=lambda g: g.group_id)
    return r


@case("delete-groups", 42)
def _(s: Side, v: int) -> Any:
    empty, live = unique("del-empty", v), unique("del-live", v)
    ready_coordinator(s, empty)
    commit(s, 2, empty)
    synced(s, 5, live)
    r = s.call(42, v, {"groups_names": [empty, live, "diff-no-such-group"]})
    sort_by(r.results, "group_id")
    return r


@case("offset-delete", 47)
def _(s: Side, v: int) -> Any:
    r = s.call(47, v, {"group_id": GROUP, "topics": [
        {"name": DATA_TOPIC, "partitions": [{"partition_index": 0},
                                            {"partition_index": 5}]}]})
    for t in r.topics:
        sort_by(t.partitions, "partition_index")
    return r


@case("offset-delete-unknown-group", 47)
def _(s: Side, v: int) -> Any:
    return s.call(47, v, {"group_id": "diff-no-such-group", "topics": [
        {"name": DATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
