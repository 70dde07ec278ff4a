# `kafkalite topics list|create|describe|alter|delete`: what kafka-topics.sh and the topic
# part of kafka-configs.sh do, over the public protocol (Metadata, CreateTopics,
# DescribeConfigs, CreatePartitions, IncrementalAlterConfigs, DeleteTopics), so it works
# against any Kafka broker.
#
# Describe shows the configs a topic overrides (config source DYNAMIC_TOPIC_CONFIG), as
# kafka-topics.sh does; a broker without DescribeConfigs still gets its partitions described.
# Alter changes only what is named: configs go through IncrementalAlterConfigs (SET/DELETE),
# never the legacy AlterConfigs that resets every other override.
from __future__ import annotations

import argparse

from .common import (add_command, check_code, key_value, kafka_error, open_admin,
                     positive_int, report_deletions, send)
from .output import emit_json, table

TOPIC_RESOURCE = 2           # ConfigResource.Type.TOPIC
DYNAMIC_TOPIC_CONFIG = 1     # DescribeConfigs config_source
OP_SET, OP_DELETE = 0, 1     # IncrementalAlterConfigs config_operation
UNKNOWN_TOPIC = 3
TOPIC_ALREADY_EXISTS = 36


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="list, create, describe, alter and delete topics")
    tsub = p.add_subparsers(dest="topics_command", required=True, metavar="ACTION")

    s = add_command(tsub, "list", _list, "list topic names")
    s.add_argument("--exclude-internal", action="store_true", help="hide internal topics")

    s = add_command(tsub, "create", _create, "create a topic")
    s.add_argument("--topic", required=True)
    s.add_argument("--partitions", type=positive_int,
                   help="number of partitions (default: the broker's num.partitions)")
    s.add_argument("--replication-factor", type=positive_int,
                   help="replicas per partition (default: the broker's default)")
    s.add_argument("--config", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="a topic config override (repeatable)")
    s.add_argument("--if-not-exists", action="store_true",
                   help="succeed quietly when the topic already exists")

    s = add_command(tsub, "describe", _describe, "partitions, leaders and config overrides")
    s.add_argument("--topic", action="append", default=[],
                   help="topic to describe (repeatable; default: all topics)")
    s.add_argument("--exclude-internal", action="store_true", help="hide internal topics")

    s = add_command(tsub, "alter", _alter, "add partitions or change topic configs")
    s.add_argument("--topic", required=True)
    s.add_argument("--partitions", type=positive_int,
                   help="new total number of partitions (can only grow)")
    s.add_argument("--config", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="set a topic config (repeatable)")
    s.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="remove a topic config override (repeatable)")

    s = add_command(tsub, "delete", _delete, "delete topics")
    s.add_argument("--topic", action="append", required=True,
                   help="topic to delete (repeatable)")
    s.add_argument("--if-exists", action="store_true",
                   help="succeed quietly for topics that do not exist")


def _metadata_topics(admin, names: list[str] | None) -> list[dict]:
    topics = admin.describe_topics(names or None)
    return sorted(topics, key=lambda t: t["name"] or "")


def _list(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        topics = _metadata_topics(admin, None)
    finally:
        admin.close()
    rows = [{"name": t["name"], "partitions": len(t["partitions"]),
             "internal": bool(t.get("is_internal"))}
            for t in topics if not (args.exclude_internal and t.get("is_internal"))]
    if args.json:
        emit_json(rows)
    else:
        table(["TOPIC", "PARTITIONS"], [(r["name"], r["partitions"]) for r in rows])
    return 0


def _create(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        spec = {"num_partitions": args.partitions or -1,
                "replication_factor": args.replication_factor or -1,
                "configs": dict(args.config)}
        result = admin.create_topics({args.topic: spec}, timeout_ms=args.timeout,
                                     raise_errors=False)
    finally:
        admin.close()
    entry = result["topics"][0]
    code = entry["error_code"]
    if code == TOPIC_ALREADY_EXISTS and args.if_not_exists:
        if args.json:
            emit_json({"topic": args.topic, "created": False})
        return 0
    check_code(code, entry.get("error_message"))
    if args.json:
        emit_json({"topic": args.topic, "created": True,
                   "topic_id": _uuid_text(entry.get("topic_id")),
                   "partitions": _known(entry.get("num_partitions"), args.partitions),
                   "replication_factor": _known(entry.get("replication_factor"),
                                                args.replication_factor)})
    else:
        print(f"Created topic {args.topic}.")
    return 0


def _known(answered, asked):
    """CreateTopics v5+ answers the partition count; older versions echo -1."""
    if answered is not None and answered >= 0:
        return answered
    return asked


def _uuid_text(value) -> str | None:
    if value is None or str(value) == "00000000-0000-0000-0000-000000000000":
        return None
    return str(value)


def topic_configs(admin, names: list[str]) -> dict[str, dict[str, str]] | None:
    """Config overrides per topic, or None when the broker has no DescribeConfigs."""
    import kafka.errors as Errors
    from kafka.protocol.admin import DescribeConfigsRequest
    if not names:
        return {}
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[
        resource(resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=None)
        for n in names])
    try:
        response = send(admin, request)
    except Errors.IncompatibleBrokerVersion:
        return None
    out: dict[str, dict[str, str]] = {}
    for result in response.results:
        check_code(result.error_code, result.error_message)
        out[result.resource_name] = {
            c.name: c.value for c in result.configs
            if _config_source(c) == DYNAMIC_TOPIC_CONFIG}
    return out


def _config_source(entry) -> int:
    source = getattr(entry, "config_source", None)
    if source is not None and source >= 0:
        return source
    # DescribeConfigs v0 has is_default instead of a source.
    return 5 if getattr(entry, "is_default", False) else DYNAMIC_TOPIC_CONFIG


def _describe(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        topics = _metadata_topics(admin, args.topic)
        for t in topics:
            _check_topic(t)
        topics = [t for t in topics
                  if not (args.exclude_internal and t.get("is_internal"))]
        configs = topic_configs(admin, [t["name"] for t in topics])
    finally:
        admin.close()
    described = []
    for t in topics:
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        described.append({
            "name": t["name"],
            "topic_id": _uuid_text(t.get("topic_id")),
            "internal": bool(t.get("is_internal")),
            "replication_factor": max((len(p["replica_nodes"]) for p in parts), default=0),
            "configs": None if configs is None else configs.get(t["name"], {}),
            "partitions": [{"partition": p["partition_index"], "leader": p["leader_id"],
                            "leader_epoch": p.get("leader_epoch", -1),
                            "replicas": list(p["replica_nodes"]), "isr": list(p["isr_nodes"]),
                            "offline": list(p.get("offline_replicas") or [])}
                           for p in parts]})
    if args.json:
        emit_json(described)
        return 0
    table(["TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"],
          [(d["name"], d["topic_id"], len(d["partitions"]), d["replication_factor"],
            ",".join(f"{k}={v}" for k, v in sorted((d["configs"] or {}).items())) or None)
           for d in described])
    print()
    table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
          [(d["name"], p["partition"], p["leader"], p["replicas"], p["isr"])
           for d in described for p in d["partitions"]])
    return 0


def _alter(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        args.parser.error("nothing to alter: give --partitions, --config or --delete-config")
    admin = open_admin(args)
    try:
        require_topic(admin, args.topic)
        if args.partitions is not None:
            _add_partitions(admin, args)
        if args.config or args.delete_config:
            _alter_configs(admin, args)
    finally:
        admin.close()
    if args.json:
        emit_json({"topic": args.topic, "partitions": args.partitions,
                   "set": dict(args.config), "deleted": list(args.delete_config)})
    else:
        print(f"Altered topic {args.topic}.")
    return 0


def _add_partitions(admin, args: argparse.Namespace) -> None:
    response = admin.create_partitions({args.topic: args.partitions},
                                       timeout_ms=args.timeout, raise_errors=False)
    for result in response.results:
        check_code(result.error_code, result.error_message)


def _alter_configs(admin, args: argparse.Namespace) -> None:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    entry = resource.AlterableConfig
    changes = [entry(name=k, config_operation=OP_SET, value=v) for k, v in args.config]
    changes += [entry(name=k, config_operation=OP_DELETE, value=None)
                for k in args.delete_config]
    request = IncrementalAlterConfigsRequest(
        resources=[resource(resource_type=TOPIC_RESOURCE, resource_name=args.topic,
                            configs=changes)],
        validate_only=False)
    response = send(admin, request)
    for result in response.responses:
        check_code(result.error_code, result.error_message)


def _delete(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        result = admin.delete_topics(args.topic, timeout_ms=args.timeout, raise_errors=False)
    finally:
        admin.close()
    done, failure = [], None
    for entry in result["topics"]:
        code = entry["error_code"]
        if code == UNKNOWN_TOPIC and args.if_exists:
            continue
        if code:
            if failure is None:
                message = entry.get("error_message")
                if code == UNKNOWN_TOPIC:  # Kafka's text names a partition, not the topic
                    message = f"Topic '{entry['name']}' does not exist."
                failure = kafka_error(code, message)
            continue
        done.append(entry["name"])
    return report_deletions(args, done, "topic", failure)


def require_topic(admin, name: str) -> dict:
    """The topic's metadata, or CliError UNKNOWN_TOPIC_OR_PARTITION."""
    return _check_topic(_metadata_topics(admin, [name])[0])


def _check_topic(topic: dict) -> dict:
    if topic["error_code"] == UNKNOWN_TOPIC:
        raise kafka_error(UNKNOWN_TOPIC, f"Topic '{topic['name']}' does not exist.")
    check_code(topic["error_code"])
    return topic

