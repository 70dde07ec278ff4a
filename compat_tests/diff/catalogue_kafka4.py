# Diff cases for the keys kafkalite took up for Kafka 4.0's client-facing set (34, 35, 43, 45,
# 46, 48-51, 55, 75), ListOffsets' duplicate partitions and GROUP config resources; see
# catalogue.py. Cases that store something (quotas, SCRAM credentials) use names unique to
# the case and version, so both brokers see the same history.
from __future__ import annotations

import base64
from typing import Any

from compat_tests.diff.catalogue import case, sort_by, unique
from compat_tests.diff.conftest import DATA_TOPIC, GROUP, TWO_TOPIC, Side
from tests.helpers.real_kafka import eventually

NO_TOPIC = "diff-no-such-topic"
GROUP_RESOURCE = 16  # ConfigResource.Type.GROUP


def ours(topic: str) -> bool:
    """Topics the all-topics answers compare: this suite's and __consumer_offsets. Kafka's
    __transaction_state (made for a transactional InitProducerId; kafkalite has no
    transactions, as find-coordinator-transaction pins) and topics other suites sharing the
    real Kafka created are left out."""
    return topic.startswith("diff-") or topic == "__consumer_offsets"


# -- ListOffsets (2): a partition named twice ------------------------------------------------

@case("list-offsets-duplicate-partition", 2)
def _(s: Side, v: int) -> Any:
    part = {"current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1}
    return s.call(2, v, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": DATA_TOPIC, "partitions": [{"partition_index": 0, **part},
                                            {"partition_index": 0, **part}]},
        {"name": TWO_TOPIC, "partitions": [{"partition_index": 1, **part}]}]})


# -- AlterReplicaLogDirs (34) / DescribeLogDirs (35) -----------------------------------------

@case("alter-replica-log-dirs-unknown-dir", 34)
def _(s: Side, v: int) -> Any:
    r = s.call(34, v, {"dirs": [{"path": "/diff/no/such/dir", "topics": [
        {"name": DATA_TOPIC, "partitions": [0]}, {"name": NO_TOPIC, "partitions": [0, 1]}]}]})
    for t in r.results:  # Kafka: its hash map's order
        sort_by(t.partitions, "partition_index")
    return r


@case("alter-replica-log-dirs-empty", 34)
def _(s: Side, v: int) -> Any:
    return s.call(34, v, {"dirs": []})


def log_dirs(s: Side, v: int, topics: list[tuple[str, list[int]]] | None) -> Any:
    r = s.call(35, v, {"topics": None if topics is None else
                       [{"topic": t, "partitions": p} for t, p in topics]})
    for d in r.results:  # Kafka lists topics and partitions in its hash maps' order
        for t in sort_by(d.topics, "name"):
            sort_by(t.partitions, "partition_index")
    return r


for _label, _parts in (("named", [(DATA_TOPIC, [0]), (TWO_TOPIC, [1, 0, 7])]),
                       ("unknown", [(NO_TOPIC, [0]), (DATA_TOPIC, [3])]), ("empty", [])):
    case(f"describe-log-dirs-{_label}", 35)(
        lambda s, v, _parts=_parts: log_dirs(s, v, _parts))


@case("describe-log-dirs-all", 35)
def _(s: Side, v: int) -> Any:
    # Every partition: the two shared topics are compared whole; the rest (other cases'
    # topics, __consumer_offsets with each broker's own group records) by name only.
    r = log_dirs(s, v, None)
    out = []
    for d in r.results:
        d = d.to_dict()
        shared = [t for t in d["topics"] if t["name"] in (DATA_TOPIC, TWO_TOPIC)]
        names = sorted(t["name"] for t in d["topics"] if ours(t["name"]))
        out.append({**d, "topics": shared, "names": names})
    return out


# -- ElectLeaders (43) -----------------------------------------------------------------------

def elect(s: Side, v: int, parts: list[tuple[str, list[int]]] | None, kind: int = 0) -> Any:
    return s.call(43, v, {"election_type": kind, "timeout_ms": 15000, "topic_partitions":
                          None if parts is None else
                          [{"topic": t, "partitions": p} for t, p in parts]})


@case("elect-leaders-preferred", 43)
def _(s: Side, v: int) -> Any:
    return elect(s, v, [(DATA_TOPIC, [0]), (TWO_TOPIC, [0, 1])])


@case("elect-leaders-unclean", 43, versions=lambda v: v >= 1)
def _(s: Side, v: int) -> Any:
    return elect(s, v, [(DATA_TOPIC, [0])], kind=1)


for _label, _parts in (("unknown", [(NO_TOPIC, [0]), (DATA_TOPIC, [9])]), ("empty", [])):
    case(f"elect-leaders-{_label}", 43)(lambda s, v, _parts=_parts: elect(s, v, _parts))


@case("elect-leaders-all", 43)
def _(s: Side, v: int) -> Any:
    r = elect(s, v, None)
    r.replica_election_results = [x for x in r.replica_election_results
                                  if ours(x.topic)]
    sort_by(r.replica_election_results, "topic")  # Kafka: its hash map's order
    return r


# -- AlterPartitionReassignments (45) / ListPartitionReassignments (46) ----------------------

def reassign(s: Side, v: int, parts: list[tuple[str, int, list[int] | None]]) -> Any:
    return s.call(45, v, {"timeout_ms": 15000, "allow_replication_factor_change": True,
                          "topics": [{"name": t, "partitions": [
                              {"partition_index": p, "replicas": r}]} for t, p, r in parts]})


@case("alter-reassignments-same-replica", 45)
def _(s: Side, v: int) -> Any:
    return reassign(s, v, [(DATA_TOPIC, 0, [1])])


@case("alter-reassignments-cancel-none", 45)
def _(s: Side, v: int) -> Any:
    return reassign(s, v, [(DATA_TOPIC, 0, None)])


@case("alter-reassignments-bad-replicas", 45)
def _(s: Side, v: int) -> Any:
    return reassign(s, v, [(DATA_TOPIC, 0, []), (TWO_TOPIC, 0, [7]), (TWO_TOPIC, 1, [1, 1])])


@case("alter-reassignments-unknown", 45)
def _(s: Side, v: int) -> Any:
    return reassign(s, v, [(NO_TOPIC, 0, [1]), (DATA_TOPIC, 5, [1])])


@case("alter-reassignments-empty", 45)
def _(s: Side, v: int) -> Any:
    return s.call(45, v, {"timeout_ms": 15000, "allow_replication_factor_change": True,
                          "topics": []})


@case("list-reassignments-all", 46)
def _(s: Side, v: int) -> Any:
    return s.call(46, v, {"timeout_ms": 15000, "topics": None})


@case("list-reassignments-named", 46)
def _(s: Side, v: int) -> Any:
    return s.call(46, v, {"timeout_ms": 15000, "topics": [
        {"name": DATA_TOPIC, "partition_indexes": [0, 4]},
        {"name": NO_TOPIC, "partition_indexes": [0]}]})


# -- DescribeClientQuotas (48) / AlterClientQuotas (49) --------------------------------------

def alter_quotas(s: Side, v: int, entries: list[tuple[list[tuple[str, str | None]],
                                                       list[tuple[str, float, bool]]]],
                 validate_only: bool = False) -> Any:
    return s.call(49, v, {"validate_only": validate_only, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "ops": [{"key": k, "value": x, "remove": rm} for k, x, rm in ops]}
        for entity, ops in entries]})


def describe_quotas(s: Side, v: int, components: list[tuple[str, int, str | None]],
                    strict: bool = False) -> Any:
    return s.call(48, v, {"strict": strict, "components": [
        {"entity_type": t, "match_type": m, "match": x} for t, m, x in components]})


@case("alter-client-quotas-set-then-describe", 49)
def _(s: Side, v: int) -> Any:
    user = unique("quota-user", v)
    a = alter_quotas(s, v, [([("user", user)], [("producer_byte_rate", 1024000.0, False),
                                                 ("request_percentage", 50.0, False)]),
                            ([("user", user), ("client-id", "c1")],
                             [("consumer_byte_rate", 2048000.0, False)])])
    # Kafka's broker sees the change once its metadata image catches up: wait, bounded.
    d = eventually(lambda: describe_quotas(s, min(v, 1), [("user", 0, user)]),
                   lambda d: len(d.entries) == 2)
    return {"alter": a, "describe": d}


@case("alter-client-quotas-validate-only", 49)
def _(s: Side, v: int) -> Any:
    user = unique("quota-validate", v)
    a = alter_quotas(s, v, [([("user", user)], [("producer_byte_rate", 1000.0, False)])],
                     validate_only=True)
    return {"alter": a, "describe": describe_quotas(s, min(v, 1), [("user", 0, user)])}


@case("alter-client-quotas-bad-values", 49)
def _(s: Side, v: int) -> Any:
    return {f"{i}": alter_quotas(s, v, [(entity, ops)], validate_only=True) for i, (entity, ops)
            in enumerate([
                ([("user", "u")], [("no_such_quota", 1.0, False)]),
                ([("user", "u")], [("producer_byte_rate", 1.5, False)]),
                ([("user", "u")], [("producer_byte_rate", -5.0, False)]),
                ([("ip", "1.2.3.4"), ("user", "u")], [("connection_creation_rate", 5.0,
                                                       False)]),
                ([("ip", "not an ip")], [("connection_creation_rate", 5.0, False)]),
                ([("no-such-type", "x")], [("producer_byte_rate", 5.0, False)]),
                ([], [("producer_byte_rate", 5.0, False)]),
                ([("user", "u")], [("producer_byte_rate", 5.0, False),
                                   ("producer_byte_rate", 6.0, False)])])}


@case("alter-client-quotas-remove-missing", 49)
def _(s: Side, v: int) -> Any:
    return alter_quotas(s, v, [([("client-id", unique("quota-gone", v))],
                                [("consumer_byte_rate", 0.0, True)])])


@case("describe-client-quotas-unknown", 48)
def _(s: Side, v: int) -> Any:
    return describe_quotas(s, v, [("user", 0, "diff-nobody")])


@case("describe-client-quotas-bad-filters", 48)
def _(s: Side, v: int) -> Any:
    return {f"{i}": describe_quotas(s, v, c) for i, c in enumerate([
        [("no-such-type", 2, None)], [("user", 9, None)], [("user", 1, "x")],
        [("user", 2, None), ("user", 2, None)], [("ip", 2, None), ("user", 2, None)],
        [("", 2, None)]])}


@case("describe-client-quotas-strict-empty", 48)
def _(s: Side, v: int) -> Any:
    return describe_quotas(s, v, [("client-id", 0, "diff-nobody")], strict=True)


# -- DescribeUserScramCredentials (50) / AlterUserScramCredentials (51) ----------------------

SALT, PASSWORD = base64.b64decode("c2FsdHNhbHQ="), b"secret-salted-password-32-bytes!"


def alter_scram(s: Side, v: int, upserts: list[tuple[str, int, int]],
                deletions: list[tuple[str, int]] = ()) -> Any:
    return s.call(51, v, {"deletions": [{"name": n, "mechanism": m} for n, m in deletions],
                          "upsertions": [{"name": n, "mechanism": m, "iterations": i,
                                          "salt": SALT, "salted_password": PASSWORD}
                                         for n, m, i in upserts]})


def describe_scram(s: Side, v: int, users: list[str] | None) -> Any:
    return s.call(50, v, {"users": None if users is None else [{"name": u} for u in users]})


@case("alter-scram-upsert-then-describe", 51)
def _(s: Side, v: int) -> Any:
    a, b = unique("scram-a", v), unique("scram-b", v)
    r = alter_scram(s, v, [(a, 1, 4096), (b, 2, 8192)])
    d = eventually(lambda: describe_scram(s, 0, [a, b]),
                   lambda d: all(x.error_code == 0 for x in d.results))
    return {"alter": r, "describe": d}


@case("alter-scram-bad", 51)
def _(s: Side, v: int) -> Any:
    u = unique("scram-bad", v)
    return {"iterations": alter_scram(s, v, [(u, 1, 100)]),
            "mechanism": alter_scram(s, v, [(u, 7, 4096)]),
            "empty-user": alter_scram(s, v, [("", 1, 4096)]),
            "delete-missing": alter_scram(s, v, [], [(u, 2)]),
            "twice": alter_scram(s, v, [(u, 1, 4096)], [(u, 2)])}


@case("describe-scram-unknown-and-duplicate", 50)
def _(s: Side, v: int) -> Any:
    return describe_scram(s, v, ["diff-nobody", "diff-twice", "diff-twice"])


# -- DescribeQuorum (55) ---------------------------------------------------------------------

QUORUM_GAP = ("kafkalite has no metadata log: high watermark and log end offset 0 where "
              "Kafka's metadata log has records")


@case("describe-quorum", 55, deliberate=QUORUM_GAP)
def _(s: Side, v: int) -> Any:
    return s.call(55, v, {"topics": [{"topic_name": "__cluster_metadata",
                                      "partitions": [{"partition_index": 0}]}]})


@case("describe-quorum-shape", 55)
def _(s: Side, v: int) -> Any:
    # The same answer with the metadata log's offsets left out: everything else must match.
    r = s.call(55, v, {"topics": [{"topic_name": "__cluster_metadata",
                                   "partitions": [{"partition_index": 0}]}]}).to_dict()
    for t in r["topics"]:
        for p in t["partitions"]:
            p["high_watermark"] = "<log>"
            for rep in p["current_voters"] + p["observers"]:
                rep["log_end_offset"] = "<log>"
    return r


@case("describe-quorum-unknown-partition", 55)
def _(s: Side, v: int) -> Any:
    return s.call(55, v, {"topics": [{"topic_name": DATA_TOPIC,
                                      "partitions": [{"partition_index": 0}]}]})


# -- DescribeTopicPartitions (75) ------------------------------------------------------------

def dtp(s: Side, topics: list[str], limit: int = 2000,
        cursor: tuple[str, int] | None = None) -> Any:
    return s.call(75, 0, {"topics": [{"name": t} for t in topics],
                          "response_partition_limit": limit,
                          "cursor": None if cursor is None else
                          {"topic_name": cursor[0], "partition_index": cursor[1]}})


@case("describe-topic-partitions", 75)
def _(s: Side, v: int) -> Any:
    return dtp(s, [TWO_TOPIC, DATA_TOPIC])


@case("describe-topic-partitions-paged", 75)
def _(s: Side, v: int) -> Any:
    names = [TWO_TOPIC, DATA_TOPIC]
    return [dtp(s, names, 1), dtp(s, names, 1, (TWO_TOPIC, 1)), dtp(s, names, 2),
            dtp(s, names, 0), dtp(s, names, 5000, (TWO_TOPIC, 1))]


@case("describe-topic-partitions-unknown-and-invalid", 75)
def _(s: Side, v: int) -> Any:
    return dtp(s, [NO_TOPIC, "bad name!", DATA_TOPIC])


@case("describe-topic-partitions-bad-cursor", 75)
def _(s: Side, v: int) -> Any:
    return [dtp(s, [DATA_TOPIC], cursor=(TWO_TOPIC, 0)),
            dtp(s, [DATA_TOPIC], cursor=(DATA_TOPIC, -1)),
            dtp(s, [DATA_TOPIC], cursor=(DATA_TOPIC, 5))]


# -- GROUP config resources (DescribeConfigs 32, IncrementalAlterConfigs 44) -----------------

GROUP_CONFIGS_40 = ("GROUP config resources are Kafka 4.0's (KIP-848 group configs); Kafka 3.8 "
                    "answers them INVALID_REQUEST")


@case("describe-configs-group", 32, deliberate=GROUP_CONFIGS_40)
def _(s: Side, v: int) -> Any:
    return s.call(32, v, {"resources": [{"resource_type": GROUP_RESOURCE,
                                         "resource_name": GROUP, "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})


@case("incremental-alter-group", 44, deliberate=GROUP_CONFIGS_40)
def _(s: Side, v: int) -> Any:
    return s.call(44, v, {"validate_only": True, "resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": GROUP, "configs": [
            {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}]})
