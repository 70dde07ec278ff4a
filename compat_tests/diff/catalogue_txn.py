# Diff cases for the transaction APIs (24-28, 65, 66) on transactional ids neither broker
# knows, so that the answers do not depend on what other suites sharing the real Kafka left
# behind; the full protocol flow is compared in tests/integration/test_txn_coordinator_wire.py.
from __future__ import annotations

from typing import Any

from compat_tests.diff.catalogue import case, unique
from compat_tests.diff.conftest import DATA_TOPIC, GROUP, Side, ready_txn_coordinator

UNKNOWN_PID = 987654321
_ready: set[str] = set()


def txn_ready(s: Side) -> Side:
    """The coordinator loaded on this side (run alone, these cases would meet Kafka's
    NOT_COORDINATOR while it creates __transaction_state)."""
    if s.name not in _ready:
        ready_txn_coordinator(s)
        _ready.add(s.name)
    return s


@case("add-partitions-to-txn-unknown-id", 24, versions=lambda v: v < 4)
def _(s: Side, v: int) -> Any:
    # Kafka 3.x names the client form's fields v3_and_below_* (v4 added the batched form)
    return txn_ready(s).call(24, v, {"v3_and_below_transactional_id": unique("diff-txn", v),
                          "v3_and_below_producer_id": UNKNOWN_PID,
                          "v3_and_below_producer_epoch": 0,
                          "v3_and_below_topics": [{"name": DATA_TOPIC, "partitions": [0]}]})


@case("add-offsets-to-txn-unknown-id", 25)
def _(s: Side, v: int) -> Any:
    return txn_ready(s).call(25, v, {"transactional_id": unique("diff-txn", v), "producer_id": UNKNOWN_PID,
                          "producer_epoch": 0, "group_id": GROUP})


@case("end-txn-unknown-id", 26)
def _(s: Side, v: int) -> Any:
    return txn_ready(s).call(26, v, {"transactional_id": unique("diff-txn", v), "producer_id": UNKNOWN_PID,
                          "producer_epoch": 0, "committed": True})


@case("txn-offset-commit-unknown-producer", 28)
def _(s: Side, v: int) -> Any:
    return txn_ready(s).call(28, v, {"transactional_id": unique("diff-txn", v), "group_id": GROUP,
                          "producer_id": UNKNOWN_PID, "producer_epoch": 0,
                          "generation_id": -1, "member_id": "", "group_instance_id": None,
                          "topics": [{"name": DATA_TOPIC, "partitions": [
                              {"partition_index": 0, "committed_offset": 1,
                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]})


@case("describe-transactions-unknown-id", 65)
def _(s: Side, v: int) -> Any:
    return txn_ready(s).call(65, v, {"transactional_ids": [unique("diff-txn", v)]})


@case("list-transactions-filtered-to-nothing", 66)
def _(s: Side, v: int) -> Any:
    return txn_ready(s).call(66, v, {"state_filters": ["Ongoing"], "producer_id_filters": [UNKNOWN_PID],
                          "duration_filter": -1})


@case("write-txn-markers-unknown-partitions", 27)
def _(s: Side, v: int) -> Any:
    # What kafka-transactions.sh abort sends, for a partition neither broker has: nothing is
    # written, UNKNOWN_TOPIC_OR_PARTITION. One partition: Kafka orders results by hash.
    return txn_ready(s).call(27, v, {"markers": [{
        "producer_id": UNKNOWN_PID, "producer_epoch": 0, "transaction_result": False,
        "coordinator_epoch": -1, "topics": [{"name": DATA_TOPIC, "partition_indexes": [99]}]}]})

