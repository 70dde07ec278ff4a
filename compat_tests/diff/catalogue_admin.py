# Diff cases for the admin keys (topics, configs, records, cluster); see catalogue.py.
from __future__ import annotations

from typing import Any

from compat_tests.diff.catalogue import case, sort_by, unique
from compat_tests.diff.conftest import DATA_TOPIC, Side, create_topic

TOPIC, BROKER = 2, 4  # config resource types
TOPIC_CONFIGS_40 = ("kafkalite lists Kafka 3.9/4.0's topic configs (36, with 4.0 defaults such "
                    "as message.timestamp.after.max.ms=3600000) in its own order; Kafka 3.8 "
                    "has 34")


def create_topics(s: Side, v: int, topics: list[dict], validate_only: bool = False) -> Any:
    full = [{"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [],
             **t} for t in topics]
    return s.call(19, v, {"topics": full, "timeout_ms": 15000, "validate_only": validate_only})


@case("create-topics-ok", 19, versions=lambda v: v < 5)
@case("create-topics-ok-configs", 19, versions=lambda v: v >= 5,
      deliberate=TOPIC_CONFIGS_40)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": unique("created", v), "num_partitions": 2,
                                 "configs": [{"name": "retention.ms", "value": "1000000"}]}])


@case("create-topics-validate-only", 19, versions=lambda v: v < 5)
@case("create-topics-validate-only-configs", 19, versions=lambda v: v >= 5,
      deliberate=TOPIC_CONFIGS_40)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": unique("validate", v)}], validate_only=True)


@case("create-topics-exists", 19)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": DATA_TOPIC}])


@case("create-topics-duplicate-names", 19)
def _(s: Side, v: int) -> Any:
    name = unique("dup", v)
    return create_topics(s, v, [{"name": name}, {"name": name}])


@case("create-topics-invalid-config", 19)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": unique("badcfg", v),
                                 "configs": [{"name": "retention.ms", "value": "soon"}]}])


@case("create-topics-unknown-config", 19)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": unique("unkcfg", v),
                                 "configs": [{"name": "no.such.config", "value": "1"}]}])


@case("create-topics-zero-partitions", 19)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": unique("zero", v), "num_partitions": 0}])


@case("create-topics-replication-3", 19)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": unique("rf3", v), "replication_factor": 3}])


@case("create-topics-invalid-name", 19,
      deliberate="same error code (INVALID_TOPIC_EXCEPTION); kafkalite's message wording "
                 "differs from 3.8's \"Topic name is invalid: ...\" (not yet aligned)")
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [{"name": "bad name!"}, {"name": ".."}])


@case("create-topics-empty", 19)
def _(s: Side, v: int) -> Any:
    return create_topics(s, v, [])


@case("delete-topics-unknown", 20)
def _(s: Side, v: int) -> Any:
    return s.call(20, v, {"topic_names": ["diff-no-such-topic"],
                          "topics": [{"name": "diff-no-such-topic"}], "timeout_ms": 15000})


@case("delete-topics-ok", 20)
def _(s: Side, v: int) -> Any:
    name = unique("deleted", v)
    create_topic(s, name)
    return s.call(20, v, {"topic_names": [name], "topics": [{"name": name}],
                          "timeout_ms": 15000})


def delete_records(s: Side, v: int, topic: str, partition: int, offset: int) -> Any:
    return s.call(21, v, {"topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "offset": offset}]}], "timeout_ms": 15000})


@case("delete-records-out-of-range", 21)
def _(s: Side, v: int) -> Any:
    return delete_records(s, v, DATA_TOPIC, 0, 50)


@case("delete-records-unknown-partition", 21)
def _(s: Side, v: int) -> Any:
    return delete_records(s, v, DATA_TOPIC, 4, 0)


@case("delete-records-ok", 21)
def _(s: Side, v: int) -> Any:
    from compat_tests.diff.conftest import RECORDS, produce
    name = unique("delrec", v)
    create_topic(s, name)
    produce(s, name, 0, RECORDS)
    return delete_records(s, v, name, 0, 2)


@case("init-producer-id", 22)
def _(s: Side, v: int) -> Any:
    import time
    deadline = time.monotonic() + 15
    while True:  # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until it has a producer-id block
        r = s.call(22, v, {"transactional_id": None, "transaction_timeout_ms": 60000,
                           "producer_id": -1, "producer_epoch": -1})
        if r.error_code != 14 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


@case("offset-for-leader-epoch", 23)
def _(s: Side, v: int) -> Any:
    return s.call(23, v, {"replica_id": -2, "topics": [{"topic": DATA_TOPIC, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "leader_epoch": e}
        for p, e in ((0, 0), (0, 5), (3, 0))]}]})


def describe_configs(s: Side, v: int, resources: list[tuple[int, str, list[str] | None]],
                     synonyms: bool = True) -> Any:
    return s.call(32, v, {"resources": [{"resource_type": t, "resource_name": n,
                                         "configuration_keys": k} for t, n, k in resources],
                          "include_synonyms": synonyms, "include_documentation": False})


@case("describe-configs-topic", 32, deliberate=TOPIC_CONFIGS_40)
def _(s: Side, v: int) -> Any:
    return describe_configs(s, v, [(TOPIC, DATA_TOPIC, None)])


@case("describe-configs-topic-keys", 32)
def _(s: Side, v: int) -> Any:
    return describe_configs(s, v, [(TOPIC, DATA_TOPIC, ["retention.ms", "cleanup.policy",
                                                         "no.such.config"])])


@case("describe-configs-broker-keys", 32,
      deliberate="kafkalite answers configuration_keys in request order, Kafka in its "
                 "ConfigDef order")
def _(s: Side, v: int) -> Any:
    return describe_configs(s, v, [(BROKER, "1", ["num.partitions", "log.retention.hours",
                                                  "message.max.bytes",
                                                  "auto.create.topics.enable"])])


@case("describe-configs-unknown-topic", 32)
def _(s: Side, v: int) -> Any:
    return describe_configs(s, v, [(TOPIC, "diff-no-such-topic", None)])


@case("describe-configs-other-broker", 32)
def _(s: Side, v: int) -> Any:
    return describe_configs(s, v, [(BROKER, "7", None)])


@case("describe-configs-bad-resource-type", 32)
def _(s: Side, v: int) -> Any:
    return describe_configs(s, v, [(99, "x", None)])


def alter_configs(s: Side, v: int, topic: str, configs: dict[str, str],
                  validate_only: bool) -> Any:
    return s.call(33, v, {"resources": [{"resource_type": TOPIC, "resource_name": topic,
                                         "configs": [{"name": k, "value": x}
                                                     for k, x in configs.items()]}],
                          "validate_only": validate_only})


@case("alter-configs-invalid", 33)
def _(s: Side, v: int) -> Any:
    return alter_configs(s, v, DATA_TOPIC, {"retention.ms": "soon"}, True)


@case("alter-configs-unknown-topic", 33)
def _(s: Side, v: int) -> Any:
    return alter_configs(s, v, "diff-no-such-topic", {"retention.ms": "1000"}, True)


@case("alter-configs-validate-only", 33)
def _(s: Side, v: int) -> Any:
    return alter_configs(s, v, DATA_TOPIC, {"retention.ms": "5000"}, True)


@case("create-partitions-not-increase", 37)
def _(s: Side, v: int) -> Any:
    r = s.call(37, v, {"topics": [{"name": DATA_TOPIC, "count": 1, "assignments": None},
                                  {"name": "diff-no-such-topic", "count": 3,
                                   "assignments": None}],
                       "timeout_ms": 15000, "validate_only": True})
    sort_by(r.results, "name")
    return r


@case("create-partitions-validate", 37)
def _(s: Side, v: int) -> Any:
    return s.call(37, v, {"topics": [{"name": DATA_TOPIC, "count": 3, "assignments": None}],
                          "timeout_ms": 15000, "validate_only": True})


def incremental(s: Side, v: int, ops: list[tuple[str, int, str | None]]) -> Any:
    return s.call(44, v, {"resources": [{"resource_type": TOPIC, "resource_name": DATA_TOPIC,
                                         "configs": [{"name": n, "config_operation": o,
                                                      "value": x} for n, o, x in ops]}],
                          "validate_only": True})


@case("incremental-alter-invalid", 44)
def _(s: Side, v: int) -> Any:
    return incremental(s, v, [("retention.ms", 0, "soon")])


@case("incremental-alter-append-non-list", 44)
def _(s: Side, v: int) -> Any:
    return incremental(s, v, [("retention.ms", 2, "5")])


@case("incremental-alter-duplicate-key", 44)
def _(s: Side, v: int) -> Any:
    return incremental(s, v, [("retention.ms", 0, "5"), ("retention.ms", 1, None)])


@case("incremental-alter-ok", 44)
def _(s: Side, v: int) -> Any:
    return incremental(s, v, [("retention.ms", 0, "5000"), ("cleanup.policy", 2, "compact")])


@case("describe-cluster", 60)
def _(s: Side, v: int) -> Any:
    return s.call(60, v, {"include_cluster_authorized_operations": False, "endpoint_type": 1})


@case("describe-cluster-controllers", 60, versions=lambda v: v >= 1)
def _(s: Side, v: int) -> Any:
    return s.call(60, v, {"include_cluster_authorized_operations": False, "endpoint_type": 2})


@case("describe-producers", 61)
def _(s: Side, v: int) -> Any:
    return s.call(61, v, {"topics": [{"name": DATA_TOPIC, "partition_indexes": [0, 6]}]})
