# Admin keys for test_protocol_versions.py (see protocol_cases.py).
#
# Kafka facts relied on (apache/kafka 3.8.0):
# - CreateTopics v5+ answers the topic's partitions, replication factor and full config list
#   (KIP-525); v7 its topic id. validate_only (v1+) checks without creating.
# - DescribeConfigs: a value set on the topic has source DYNAMIC_TOPIC_CONFIG (1) from v1 and
#   is_default=false at v0; v3+ carries the type (ConfigResource.Type / ConfigType: LONG = 5).
# - AlterConfigs replaces the resource's whole dynamic set; IncrementalAlterConfigs SET = 0,
#   DELETE = 1 (AlterConfigOp.OpType).
# - Topic deletion, partition creation and config changes are asynchronous in KRaft Kafka: the
#   controller answers once the change is committed, the broker's metadata cache applies it
#   moments later; so the effect is polled for (bounded), not read once.
# - DescribeCluster v1 endpoint_type 1 = brokers (KIP-919); v2 is_fenced (KIP-1073).
# - AddPartitionsToTxn v4+ and DescribeAcls: see their checks below (their expectations were
#   read off a running Kafka 3.8, not only its source).
from __future__ import annotations

import uuid

from compat_tests.clients_common import wait_for
from compat_tests.conftest import unique
from compat_tests.protocol_cases import (DATA_RECORDS, NONE, TOPIC_RETENTION_MS,
                                         UNKNOWN_TOPIC_OR_PARTITION, Ctx, batch, check)
from compat_tests.protocol_cases_groups import COMMIT_METADATA, commit, \
    fetch_offset, find_coordinator
from compat_tests.wire import Conn

DYNAMIC_TOPIC_CONFIG, TOPIC, BROKER = 1, 2, 4

# Topic configs Kafka 3.8 describes (TopicConfig / LogConfig.CONFIG) that 4.x still has (it
# dropped message.format.version, message.downconversion.enable and
# message.timestamp.difference.max.ms). DescribeConfigs answers every one of them.
TOPIC_CONFIGS = {
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable"}
# A topic without an override inherits the broker's setting (LogConfig's synonyms).
INHERITED = {"max.message.bytes": "message.max.bytes", "cleanup.policy": "log.cleanup.policy",
             "compression.type": "compression.type",
             "message.timestamp.type": "log.message.timestamp.type",
             "segment.bytes": "log.segment.bytes", "min.insync.replicas": "min.insync.replicas"}


def describe_topic_configs(ctx: Ctx, topic: str, keys: list[str] | None,
                           v: int | None = None) -> dict:
    v = ctx.target.version(32) if v is None else v
    resp = ctx.target.call(32, {"resources": [{"resource_type": TOPIC, "resource_name": topic,
                                               "configuration_keys": keys}],
                                "include_synonyms": False, "include_documentation": False}, v)
    res = resp.results[0]
    assert res.error_code == NONE, res
    return {c.name: c for c in res.configs}


def topic_state(ctx: Ctx, topic: str) -> tuple[int, int]:
    t = ctx.target.metadata([topic]).topics[0]
    return t.error_code, len(t.partitions)


@check(19)
def create_topics(ctx: Ctx, conn: Conn, v: int) -> None:
    name = unique("create")
    fields = {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1,
                          "assignments": [],
                          "configs": [{"name": "retention.ms", "value": "3600000"}]}],
              "timeout_ms": 15000, "validate_only": False}
    if v >= 1:
        # validate_only answers as if created, and creates nothing.
        resp = conn.call(19, v, {**fields, "validate_only": True})
        assert [(t.name, t.error_code) for t in resp.topics] == [(name, NONE)], resp
        assert topic_state(ctx, name)[0] == UNKNOWN_TOPIC_OR_PARTITION
    resp = conn.call(19, v, fields)
    ctx.target.created_topics.append(name)
    assert len(resp.topics) == 1, resp
    t = resp.topics[0]
    assert (t.name, t.error_code) == (name, NONE), t
    if v >= 1:
        assert t.error_message is None
    if v >= 5:
        assert (t.num_partitions, t.replication_factor) == (2, 1), t
        configs = {c.name: c for c in t.configs}
        assert configs["retention.ms"].value == "3600000"
        assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
        assert "cleanup.policy" in configs
    # Kafka's metadata cache learns of the topic moments after the controller answered.
    ctx.target.wait_for_leaders(name, 2)
    if v >= 7:
        assert t.topic_id.int != 0 and t.topic_id == ctx.topic_id(name)


@check(20)
def delete_topics(ctx: Ctx, conn: Conn, v: int) -> None:
    name = ctx.target.create_topic()
    resp = conn.call(20, v, {"topic_names": [name],
                             "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                             "timeout_ms": 15000})
    assert [(r.name, r.error_code) for r in resp.responses] == [(name, NONE)], resp
    if v >= 5:
        assert resp.responses[0].error_message is None
    wait_for(f"{name} gone from metadata",
               lambda: topic_state(ctx, name)[0] == UNKNOWN_TOPIC_OR_PARTITION)


@check(21)
def delete_records(ctx: Ctx, conn: Conn, v: int) -> None:
    name = ctx.target.create_topic()
    r = ctx.target.call(0, ctx.produce_fields(name, ctx.topic_id(name), batch(DATA_RECORDS)))
    assert r.responses[0].partition_responses[0].error_code == NONE
    resp = conn.call(21, v, {"topics": [{"name": name, "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout_ms": 15000})
    p = resp.topics[0].partitions[0]
    assert resp.topics[0].name == name and p.partition_index == 0, resp
    assert (p.error_code, p.low_watermark) == (NONE, 2), p
    lo = ctx.target.call(2, {"replica_id": -1, "topics": [{"name": name, "partitions": [
        {"partition_index": 0, "timestamp": -2, "current_leader_epoch": -1}]}]})
    assert lo.topics[0].partitions[0].offset == 2, lo


@check(32)
def describe_configs(ctx: Ctx, conn: Conn, v: int) -> None:
    conn.close()
    configs = describe_topic_configs(ctx, ctx.data_topic, None, v)
    ret = configs["retention.ms"]
    assert ret.value == TOPIC_RETENTION_MS and ret.is_sensitive is False
    if v == 0:
        assert ret.is_default is False
    else:
        assert ret.config_source == DYNAMIC_TOPIC_CONFIG
    if v >= 3:
        assert ret.config_type == 5  # LONG
    missing = TOPIC_CONFIGS - set(configs)
    assert not missing, f"DescribeConfigs(TOPIC) leaves out {sorted(missing)}"
    only = describe_topic_configs(ctx, ctx.data_topic, ["retention.ms"], v)
    assert list(only) == ["retention.ms"]
    broker = ctx.target.call(32, {"resources": [{"resource_type": BROKER,
                                                 "resource_name": str(ctx.brokers[0]),
                                                 "configuration_keys": None}]}, v)
    res = broker.results[0]
    assert res.error_code == NONE and res.resource_name == str(ctx.brokers[0]), res
    names = {c.name: c.value for c in res.configs}
    assert names.get("auto.create.topics.enable") in ("true", "false"), names
    assert "num.partitions" in names and "log.retention.hours" in names
    for topic_name, broker_name in INHERITED.items():
        assert configs[topic_name].value == names[broker_name], (topic_name, broker_name)


def config_topic(ctx: Ctx) -> str:
    return ctx.once("config_topic", lambda: ctx.target.create_topic())


@check(33)
def alter_configs(ctx: Ctx, conn: Conn, v: int) -> None:
    topic, value = config_topic(ctx), str(3_600_000 + v)
    resp = conn.call(33, v, {"resources": [{"resource_type": TOPIC, "resource_name": topic,
                                            "configs": [{"name": "retention.ms",
                                                         "value": value}]}],
                             "validate_only": False})
    r = resp.responses[0]
    assert (r.error_code, r.resource_type, r.resource_name) == (NONE, TOPIC, topic), r
    wait_for(f"retention.ms={value}", lambda: describe_topic_configs(
        ctx, topic, ["retention.ms"])["retention.ms"].value == value)


@check(44)
def incremental_alter_configs(ctx: Ctx, conn: Conn, v: int) -> None:
    topic, value = config_topic(ctx), str(7_200_000 + v)
    for op, val in ((0, value), (1, None)):  # SET, then DELETE
        resp = conn.call(44, v, {"resources": [{
            "resource_type": TOPIC, "resource_name": topic,
            "configs": [{"name": "segment.ms", "config_operation": op, "value": val}]}],
            "validate_only": False})
        r = resp.responses[0]
        assert (r.error_code, r.resource_type, r.resource_name) == (NONE, TOPIC, topic), r

        def applied() -> bool:
            seg = describe_topic_configs(ctx, topic, ["segment.ms"])["segment.ms"]
            return (seg.value == value) == (op == 0) and \
                (seg.config_source == DYNAMIC_TOPIC_CONFIG) == (op == 0)
        wait_for(f"segment.ms {'set' if op == 0 else 'deleted'}", applied)


@check(37)
def create_partitions(ctx: Ctx, conn: Conn, v: int) -> None:
    name = ctx.target.create_topic()
    resp = conn.call(37, v, {"topics": [{"name": name, "count": 3, "assignments": None}],
                             "timeout_ms": 15000, "validate_only": False})
    r = resp.results[0]
    assert (r.name, r.error_code) == (name, NONE), r
    ctx.target.wait_for_leaders(name, 3)


def empty_group_with_offset(ctx: Ctx, kind: str) -> str:
    """A fresh group with no members and offset 1 committed for the data topic."""
    group = unique(kind)
    find_coordinator(ctx, group)
    with ctx.target.conn() as c:
        r = commit(c, ctx.target.version(8), group, ctx.data_topic, 1)
        assert r.topics[0].partitions[0].error_code == NONE
        assert fetch_offset(c, ctx.target.version(9), group, ctx.data_topic) == \
            (1, COMMIT_METADATA)
    return group


@check(42)
def delete_groups(ctx: Ctx, conn: Conn, v: int) -> None:
    group = empty_group_with_offset(ctx, "delgroup")
    resp = conn.call(42, v, {"groups_names": [group]})
    assert [(x.group_id, x.error_code) for x in resp.results] == [(group, NONE)], resp
    with ctx.target.conn() as c:
        assert fetch_offset(c, ctx.target.version(9), group, ctx.data_topic)[0] == -1


@check(47)
def offset_delete(ctx: Ctx, conn: Conn, v: int) -> None:
    group = empty_group_with_offset(ctx, "offdel")
    resp = conn.call(47, v, {"group_id": group, "topics": [
        {"name": ctx.data_topic, "partitions": [{"partition_index": 0}]}]})
    assert resp.error_code == NONE, resp
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [(0, NONE)]
    with ctx.target.conn() as c:
        assert fetch_offset(c, ctx.target.version(9), group, ctx.data_topic)[0] == -1


@check(60)
def describe_cluster(ctx: Ctx, conn: Conn, v: int) -> None:
    resp = conn.call(60, v, {"include_cluster_authorized_operations": False,
                             "endpoint_type": 1, "include_fenced_brokers": False})
    assert resp.error_code == NONE, resp
    meta = ctx.target.metadata([])
    assert resp.cluster_id == meta.cluster_id and resp.cluster_id
    assert resp.controller_id in ctx.brokers or resp.controller_id == -1
    assert sorted((b.broker_id, b.host, b.port) for b in resp.brokers) == \
        sorted((b.node_id, b.host, b.port) for b in meta.brokers)
    if v >= 1:
        assert resp.endpoint_type == 1
    if v >= 2:
        assert not any(b.is_fenced for b in resp.brokers)


@check(61)
def describe_producers(ctx: Ctx, conn: Conn, v: int) -> None:
    resp = conn.call(61, v, {"topics": [{"name": ctx.data_topic, "partition_indexes": [0]}]})
    assert resp.topics[0].name == ctx.data_topic
    p = resp.topics[0].partitions[0]
    assert (p.partition_index, p.error_code) == (0, NONE), p
    assert list(p.active_producers) == []  # the data topic was written without a producer id


@check(35)
def describe_log_dirs(ctx: Ctx, conn: Conn, v: int) -> None:
    resp = conn.call(35, v, {"topics": [{"topic": ctx.data_topic, "partitions": [0]}]})
    if v >= 3:
        assert resp.error_code == NONE, resp
    assert resp.results, resp
    hits = [(d, t) for d in resp.results for t in d.topics if t.name == ctx.data_topic]
    assert len(hits) == 1, resp
    d, t = hits[0]
    assert d.error_code == NONE and d.log_dir, d
    assert [p.partition_index for p in t.partitions] == [0]
    assert t.partitions[0].partition_size > 0 and t.partitions[0].is_future_key is False
    if v >= 4:
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes


@check(75)
def describe_topic_partitions(ctx: Ctx, conn: Conn, v: int) -> None:
    resp = conn.call(75, v, {"topics": [{"name": ctx.data_topic}],
                             "response_partition_limit": 2000, "cursor": None})
    assert len(resp.topics) == 1, resp
    t = resp.topics[0]
    assert (t.name, t.error_code) == (ctx.data_topic, NONE), t
    if ctx.data_topic_id.int:
        assert t.topic_id == ctx.data_topic_id
    assert [p.partition_index for p in t.partitions] == [0]
    assert t.partitions[0].leader_id in ctx.brokers and t.partitions[0].error_code == NONE
    assert resp.next_cursor is None


@check(24)
def add_partitions_to_txn(ctx: Ctx, conn: Conn, v: int) -> None:
    # v4+ is the brokers' batched form (KIP-890: a partition leader verifying transactions with
    # the coordinator). KafkaApis answers once every transaction in it has a result, so an empty
    # list is never answered: one transaction is sent, naming a missing topic, whose partition
    # error Kafka answers before looking at the transaction.
    missing = unique("no-such-topic")
    txn = {"transactional_id": unique("txn"), "producer_id": 1234, "producer_epoch": 0,
           "topics": [{"name": missing, "partitions": [0]}]}
    if v < 4:
        resp = conn.call(24, v, {f"v3_and_below_{k}": val for k, val in txn.items()})
        topics = resp.results_by_topic_v3_and_below
    else:
        resp = conn.call(24, v, {"transactions": [{**txn, "verify_only": True}]})
        assert resp.error_code == NONE, resp
        assert [r.transactional_id for r in resp.results_by_transaction] == \
            [txn["transactional_id"]], resp
        topics = resp.results_by_transaction[0].topic_results
    assert [(t.name, [(p.partition_index, p.partition_error_code)
                      for p in t.results_by_partition]) for t in topics] == \
        [(missing, [(0, UNKNOWN_TOPIC_OR_PARTITION)])], resp


SECURITY_DISABLED = 54
ANY = 1  # AclResourceType / PatternType / AclOperation / AclPermissionType.ANY


@check(29)
def describe_acls(ctx: Ctx, conn: Conn, v: int) -> None:
    # A filter with an UNKNOWN (0) element is an invalid request, which closes the connection
    # (DescribeAclsRequest.validate); a broker without an authorizer answers SECURITY_DISABLED.
    resp = conn.call(29, v, {"resource_type_filter": ANY, "resource_name_filter": None,
                             "pattern_type_filter": ANY, "principal_filter": None,
                             "host_filter": None, "operation": ANY, "permission_type": ANY})
    assert (resp.error_code, resp.error_message, resp.resources) == \
        (SECURITY_DISABLED, "No Authorizer is configured on the broker", []), resp
