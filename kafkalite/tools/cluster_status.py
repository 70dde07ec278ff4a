# `kafkalite cluster status`: what an operator asks of a cluster, over the wire only, from
# any one broker: DescribeCluster (cluster id, controller, every live broker with its
# endpoint and rack), Metadata (each partition's leader, replicas, ISR and offline replicas)
# and DescribeConfigs (each topic's min.insync.replicas). It works against any Kafka broker,
# a kafkalite cluster, a single kafkalite node or Apache Kafka.
#
# The per-partition states are kafka-topics.sh --describe's (TopicCommand.PartitionDescription):
#   under-replicated  ISR smaller than the replicas
#   unavailable       no leader, or a leader that is not a live broker ("offline")
#   under-min-isr     unavailable, or ISR smaller than min.insync.replicas
#   at-min-isr        ISR exactly min.insync.replicas
# and --under-replicated-partitions / --unavailable-partitions / --under-min-isr-partitions /
# --at-min-isr-partitions list only those partitions, one filter at a time as Kafka's tool
# allows. The summary line always counts the whole cluster (the topics asked for).
# --fail-on-under-replicated turns an offline or under-replicated partition into exit 1, for
# scripts and probes (kafka-topics.sh always exits 0; scripts grep its output).
from __future__ import annotations

import argparse
from typing import Any

from .common import CliError, add_common, kafka_error, open_admin, send
from .output import emit_json, table

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
MIN_ISR = "min.insync.replicas"
FILTERS = (("under_replicated_partitions", "under_replicated",
            "only partitions whose ISR is smaller than their replicas"),
           ("unavailable_partitions", "unavailable",
            "only partitions without a live leader"),
           ("under_min_isr_partitions", "under_min_isr",
            "only partitions whose ISR is smaller than min.insync.replicas"),
           ("at_min_isr_partitions", "at_min_isr",
            "only partitions whose ISR is exactly min.insync.replicas"))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="the state of a cluster: brokers, controller, partitions")
    csub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    s = csub.add_parser("status", help="cluster id, controller, brokers, and every partition's "
                                       "leader, replicas, ISR and offline replicas")
    add_common(s)
    s.set_defaults(func=_status, parser=s)
    s.add_argument("--topic", action="append", default=[],
                   help="topic to show (repeatable; default: all topics)")
    s.add_argument("--exclude-internal", action="store_true", help="hide internal topics")
    only = s.add_mutually_exclusive_group()
    for dest, _, text in FILTERS:
        only.add_argument("--" + dest.replace("_", "-"), dest=dest, action="store_true",
                          help=text + " (as kafka-topics.sh --describe)")
    s.add_argument("--fail-on-under-replicated", action="store_true",
                   help="exit 1 when a partition is offline or under-replicated")


def _min_isr(admin, names: list[str]) -> dict[str, int | None]:
    """min.insync.replicas per topic (its effective value); None where the broker did not
    tell it (no DescribeConfigs, or an error for that topic)."""
    import kafka.errors as Errors
    from kafka.protocol.admin import DescribeConfigsRequest
    if not names:
        return {}
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[
        resource(resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=[MIN_ISR])
        for n in names])
    out: dict[str, int | None] = dict.fromkeys(names)
    try:
        response = send(admin, request)
    except (Errors.IncompatibleBrokerVersion, Errors.BrokerResponseError):
        return out
    for result in response.results:
        if result.error_code:
            continue
        for c in result.configs:
            if c.name == MIN_ISR and c.value is not None:
                try:
                    out[result.resource_name] = int(c.value)
                except ValueError:
                    pass
    return out


def partition_flags(leader: int, replicas: list[int], isr: list[int], live: set[int],
                    min_isr: int | None) -> dict[str, bool | None]:
    """Kafka's four partition states; the min-ISR ones None when min_isr is unknown."""
    unavailable = leader < 0 or leader not in live
    return {"under_replicated": len(isr) < len(replicas),
            "unavailable": unavailable,
            "under_min_isr": None if min_isr is None else unavailable or len(isr) < min_isr,
            "at_min_isr": None if min_isr is None else len(isr) == min_isr}


def collect(admin, topics: list[str] | None, exclude_internal: bool) -> dict[str, Any]:
    """The whole report (the --json document), from DescribeCluster, Metadata and
    DescribeConfigs answered by the broker(s) the admin client picks."""
    cluster = admin.describe_cluster()
    brokers = sorted(({"id": b["broker_id"], "host": b["host"], "port": b["port"],
                       "rack": b.get("rack")} for b in cluster["brokers"]),
                     key=lambda b: b["id"])
    live = {b["id"] for b in brokers}
    meta = admin.describe_topics(topics or None)
    for t in meta:
        if t["error_code"]:
            raise kafka_error(t["error_code"], f"topic {t['name']}")
    meta = sorted((t for t in meta if not (exclude_internal and t.get("is_internal"))),
                  key=lambda t: t["name"])
    min_isr = _min_isr(admin, [t["name"] for t in meta])
    out_topics = []
    for t in meta:
        parts = []
        for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
            replicas, isr = list(p["replica_nodes"]), list(p["isr_nodes"])
            parts.append({"partition": p["partition_index"], "leader": p["leader_id"],
                          "leader_epoch": p.get("leader_epoch", -1),
                          "replicas": replicas, "isr": isr,
                          "offline_replicas": list(p.get("offline_replicas") or []),
                          **partition_flags(p["leader_id"], replicas, isr, live,
                                            min_isr[t["name"]])})
        out_topics.append({"name": t["name"], "internal": bool(t.get("is_internal")),
                           "min_insync_replicas": min_isr[t["name"]], "partitions": parts})
    return {"cluster_id": cluster.get("cluster_id"), "controller": cluster.get("controller_id"),
            "brokers": brokers, "topics": out_topics, "summary": summarize(brokers, out_topics)}


def summarize(brokers: list[dict], topics: list[dict]) -> dict[str, Any]:
    parts = [p for t in topics for p in t["partitions"]]
    known = all(t["min_insync_replicas"] is not None for t in topics)
    return {"brokers": len(brokers), "topics": len(topics), "partitions": len(parts),
            "under_replicated": sum(p["under_replicated"] for p in parts),
            "offline": sum(p["unavailable"] for p in parts),
            "under_min_isr": sum(bool(p["under_min_isr"]) for p in parts) if known else None}


def summary_line(s: dict[str, Any]) -> str:
    under_min = "unknown" if s["under_min_isr"] is None else s["under_min_isr"]
    return (f"{s['brokers']} broker(s), {s['topics']} topic(s), {s['partitions']} "
            f"partition(s): {s['under_replicated']} under-replicated, {s['offline']} offline, "
            f"{under_min} under min ISR")


def _status(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        report = collect(admin, args.topic, args.exclude_internal)
    finally:
        admin.close()
    chosen = next((flag for dest, flag, _ in FILTERS if getattr(args, dest)), None)
    if chosen is not None:
        for t in report["topics"]:
            t["partitions"] = [p for p in t["partitions"] if p[chosen]]
        report["topics"] = [t for t in report["topics"] if t["partitions"]]
    if args.json:
        emit_json(report)
    else:
        _print(report)
    s = report["summary"]
    if args.fail_on_under_replicated and (s["under_replicated"] or s["offline"]):
        raise CliError(f"{s['under_replicated']} partition(s) under-replicated, "
                       f"{s['offline']} offline")
    return 0


def _print(report: dict[str, Any]) -> None:
    print(f"Cluster id: {report['cluster_id']}")
    print(f"Controller: {report['controller']}")
    print()
    table(["BROKER", "ENDPOINT", "RACK"],
          [(b["id"], f"{b['host']}:{b['port']}", b["rack"]) for b in report["brokers"]])
    rows = [(t["name"], p["partition"], p["leader"], p["replicas"], p["isr"],
             p["offline_replicas"] or None, _state(p))
            for t in report["topics"] for p in t["partitions"]]
    if rows:
        print()
        table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "STATE"], rows)
    print()
    print(summary_line(report["summary"]))


def _state(p: dict[str, Any]) -> str:
    words = [w for w, on in (("offline", p["unavailable"]),
                             ("under-replicated", p["under_replicated"]),
                             ("under-min-isr", p["under_min_isr"] and not p["unavailable"]))
             if on]
    return ",".join(words) or "ok"
