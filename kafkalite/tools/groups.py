# `kafkalite groups list|describe|delete|reset-offsets`: kafka-consumer-groups.sh over the
# public protocol (ListGroups, FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets,
# DeleteGroups, OffsetCommit), so it works against any Kafka broker.
#
# describe shows, per partition, the committed offset, the log end offset and the lag, and
# which member holds the partition. reset-offsets follows kafka-consumer-groups.sh: it only
# prints the plan unless --execute is given, and refuses a group that has active members,
# since their next commit would overwrite the reset (the broker would also reject it).
# Targets are clamped to [earliest, latest] of each partition, as Kafka does.
from __future__ import annotations

import argparse
import sys

from .common import (CliError, add_command, check_code, coordinator_for, kafka_error,
                     open_admin, report_deletions, send)
from .output import emit_json, table
from .reset_plan import add_reset_arguments, plan_reset

INACTIVE_STATES = ("Empty", "Dead")
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets")
    gsub = p.add_subparsers(dest="groups_command", required=True, metavar="ACTION")

    add_command(gsub, "list", _list, "list consumer groups")

    s = add_command(gsub, "describe", _describe, "members, committed offsets and lag")
    s.add_argument("--group", action="append", required=True,
                   help="group to describe (repeatable)")

    s = add_command(gsub, "delete", _delete,
                    "delete inactive consumer groups and their offsets")
    s.add_argument("--group", action="append", required=True,
                   help="group to delete (repeatable)")

    s = add_command(gsub, "reset-offsets", _reset_offsets,
                    "move an inactive group's committed offsets (dry run by default)")
    s.add_argument("--group", required=True)
    add_reset_arguments(s)


def _list(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        groups = admin.list_groups()
    finally:
        admin.close()
    rows = sorted(({"group": g["group_id"], "state": g.get("group_state") or None,
                    "protocol_type": g.get("protocol_type") or None,
                    "type": g.get("group_type") or None} for g in groups),
                  key=lambda r: r["group"])
    if args.json:
        emit_json(rows)
    else:
        table(["GROUP", "STATE", "PROTOCOL-TYPE"],
              [(r["group"], r["state"], r["protocol_type"]) for r in rows])
    return 0


def describe_group(admin, group: str) -> dict:
    """DescribeGroups for one group at its coordinator; CliError on a group-level error.

    Sent raw: kafka-python's describe_groups turns the error code into text.
    """
    from kafka.protocol.admin import DescribeGroupsRequest
    node = coordinator_for(admin, group)
    response = send(admin, DescribeGroupsRequest(groups=[group],
                                                 include_authorized_operations=False), node)
    g = response.groups[0]
    check_code(g.error_code, getattr(g, "error_message", None))
    members = [{"member_id": m.member_id,
                "group_instance_id": getattr(m, "group_instance_id", None),
                "client_id": m.client_id, "client_host": m.client_host,
                "assignment": _assigned(g.protocol_type, m.member_assignment)}
               for m in g.members]
    return {"state": g.group_state or "Unknown", "protocol_type": g.protocol_type or None,
            "protocol": g.protocol_data or None, "members": members}


def _assigned(protocol_type: str, raw: bytes | None) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a consumer-protocol assignment; none for other groups."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
    if protocol_type != "consumer" or not raw:
        return []
    try:
        assignment = ConsumerProtocolAssignment.decode(bytes(raw))
    except Exception:  # noqa: BLE001 - a client may put anything here; show no assignment
        return []
    return sorted((tp.topic, tp.partition) for tp in assignment.partitions())


def committed_offsets(admin, group: str) -> dict:
    """{TopicPartition: OffsetAndMetadata} of everything the group has committed."""
    return admin.list_group_offsets({group: None})[group]


def end_offsets(admin, partitions) -> dict:
    """{TopicPartition: log end offset}; partitions whose topic is gone are left out."""
    from kafka.protocol.consumer import OffsetSpec
    import kafka.errors as Errors
    if not partitions:
        return {}
    try:
        answer = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
    except Errors.UnknownTopicOrPartitionError:
        known = _existing(admin, partitions)
        if not known:
            return {}
        answer = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in known})
    return {tp: o.offset for tp, o in answer.items()}


def _existing(admin, partitions) -> list:
    topics = {t["name"]: {p["partition_index"] for p in t["partitions"]}
              for t in admin.describe_topics(sorted({tp.topic for tp in partitions}))
              if t["error_code"] == 0}
    return [tp for tp in partitions if tp.partition in topics.get(tp.topic, ())]


def _describe_one(admin, group: str) -> dict:
    from kafka.structs import TopicPartition
    info = describe_group(admin, group)
    committed = committed_offsets(admin, group)
    state = info["state"]
    if state == "Dead" and not committed:
        raise kafka_error(GROUP_ID_NOT_FOUND, f"Consumer group '{group}' does not exist.")
    owners = {tp: m for m in info["members"] for tp in m["assignment"]}
    members = [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                "client_id": m["client_id"], "host": m["client_host"],
                "assignment": [{"topic": t, "partition": p} for t, p in m["assignment"]]}
               for m in info["members"]]
    tps = set(committed) | {TopicPartition(t, p) for t, p in owners}
    leo = end_offsets(admin, tps)
    offsets = []
    for tp in sorted(tps):
        c = committed.get(tp)
        current = c.offset if c is not None and c.offset >= 0 else None
        end = leo.get(tp)
        owner = owners.get((tp.topic, tp.partition), {})
        offsets.append({
            "topic": tp.topic, "partition": tp.partition, "committed_offset": current,
            "log_end_offset": end,
            "lag": end - current if end is not None and current is not None else None,
            "metadata": c.metadata if c is not None else None,
            "member_id": owner.get("member_id"), "host": owner.get("client_host"),
            "client_id": owner.get("client_id")})
    return {"group": group, "state": state, "protocol_type": info["protocol_type"],
            "protocol": info["protocol"], "members": members, "offsets": offsets}


def _describe(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        described = [_describe_one(admin, g) for g in args.group]
    finally:
        admin.close()
    if args.json:
        emit_json(described)
        return 0
    for i, d in enumerate(described):
        if i:
            print()
        print(f"Consumer group '{d['group']}': state {d['state']}, "
              f"{len(d['members'])} member(s)")
        table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
               "CONSUMER-ID", "HOST", "CLIENT-ID"],
              [(d["group"], o["topic"], o["partition"], o["committed_offset"],
                o["log_end_offset"], o["lag"], o["member_id"], o["host"], o["client_id"])
               for o in d["offsets"]])
    return 0


def _delete(args: argparse.Namespace) -> int:
    import kafka.errors as Errors
    admin = open_admin(args)
    try:
        results = admin.delete_groups(args.group)
    finally:
        admin.close()
    deleted, failure = [], None
    for group in args.group:
        outcome = results.get(group, "OK")
        if outcome == "OK":
            deleted.append(group)
            continue
        cls = getattr(Errors, outcome, None)
        code = getattr(cls, "errno", None)
        if failure is None:
            if code == GROUP_ID_NOT_FOUND:
                failure = kafka_error(code, f"Consumer group '{group}' does not exist.")
            elif code == NON_EMPTY_GROUP:
                failure = kafka_error(code, f"Consumer group '{group}' is not empty.")
            elif code is not None:
                failure = kafka_error(code)
            else:
                failure = CliError(f"cannot delete group '{group}': {outcome}")
    return report_deletions(args, deleted, "consumer group", failure)


def _reset_offsets(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        state = describe_group(admin, args.group)["state"]
        if state not in INACTIVE_STATES:
            # Kafka's tool says the same, in the same words (ConsumerGroupCommand).
            raise kafka_error(NON_EMPTY_GROUP,
                              f"Assignments can only be reset if the group '{args.group}' "
                              f"is inactive, but the current state is {state}.")
        committed = committed_offsets(admin, args.group)
        plan = plan_reset(admin, args, committed)
        if args.execute and plan:
            _commit(admin, args.group, plan, committed)
    finally:
        admin.close()
    rows = [{"group": args.group, "topic": tp.topic, "partition": tp.partition,
             "previous_offset": prev, "new_offset": new}
            for tp, (prev, new) in sorted(plan.items())]
    if args.json:
        emit_json({"group": args.group, "executed": bool(args.execute), "offsets": rows})
        return 0
    table(["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
          [(r["group"], r["topic"], r["partition"], r["previous_offset"], r["new_offset"])
           for r in rows])
    if not args.execute:
        print("note: dry run, nothing changed; add --execute to apply", file=sys.stderr)
    return 0


def _commit(admin, group: str, plan: dict, committed: dict) -> None:
    from kafka.structs import OffsetAndMetadata
    offsets = {}
    for tp, (_prev, new) in plan.items():
        old = committed.get(tp)
        offsets[tp] = OffsetAndMetadata(new, old.metadata if old else "", None)
    errors = admin.alter_group_offsets(group, offsets)
    for tp, error in sorted(errors.items()):
        code = getattr(error, "errno", 0) or 0
        if code:
            raise kafka_error(code, f"{error.description} (partition {tp.topic}-{tp.partition})")
