# Kafka's kafka-transactions.sh (from the 3.8.0 anchor) against kafkalite and the real Kafka:
# `list` (ListTransactions on every broker) and `describe` (FindCoordinator key type 1, then
# DescribeTransactions) print the same rows for a transaction opened over raw requests.
from __future__ import annotations

import re

import pytest

from tests.helpers.real_kafka import anchor_dir, create_topic
from tests.integration.test_admin_tools_kafka4 import run_tool
from tests.integration.test_txn_coordinator_wire import (Wire, find_txn_coordinator, init_ok,
                                                         names)


def _rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}|\t", ln.strip()) for ln in text.splitlines() if ln.strip()]


def test_kafka_transactions_list_and_describe(any_broker):
    if anchor_dir() is None:
        pytest.skip("no Kafka anchor")
    txn, topic = names()
    create_topic(any_broker, topic, partitions=2)
    w = Wire(any_broker)
    try:
        find_txn_coordinator(w, txn)
        pid, epoch = init_ok(w, txn, timeout_ms=42000)
        w.add(txn, pid, epoch, {topic: [0, 1]})
    finally:
        w.close()
    listed = _rows(run_tool(any_broker, "kafka-transactions.sh", "list"))
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [txn, "1", str(pid), "Ongoing"] in listed[1:]
    described = _rows(run_tool(any_broker, "kafka-transactions.sh", "describe",
                               "--transactional-id", txn))
    head, row = described[0], described[1]
    assert head == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions"]
    fields = dict(zip(head, row))
    assert (fields["CoordinatorId"], fields["TransactionalId"], fields["ProducerId"],
            fields["ProducerEpoch"], fields["TransactionState"],
            fields["TransactionTimeoutMs"]) == ("1", txn, str(pid), "0", "Ongoing", "42000")
    assert sorted(fields["TopicPartitions"].split(",")) == [f"{topic}-0", f"{topic}-1"]
    assert int(fields["CurrentTransactionStartTimeMs"]) > 0


def test_kafkalite_transactions_cli_list_and_describe(any_broker):
    import json
    import subprocess
    import sys
    txn, topic = names()
    create_topic(any_broker, topic)
    w = Wire(any_broker)
    try:
        find_txn_coordinator(w, txn)
        pid, epoch = init_ok(w, txn, timeout_ms=42000)
        w.add(txn, pid, epoch, {topic: [0]})
    finally:
        w.close()

    def cli(*args: str):
        out = subprocess.run([sys.executable, "-m", "kafkalite", "transactions", *args,
                              "--bootstrap-server", any_broker, "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    rows = cli("list", "--producer-id", str(pid))
    assert rows == [{"transactional_id": txn, "coordinator": 1, "producer_id": pid,
                     "state": "Ongoing"}]
    assert cli("list", "--producer-id", str(pid), "--state", "Empty") == []
    d = cli("describe", "--transactional-id", txn)
    assert {k: d[k] for k in ("coordinator", "producer_id", "producer_epoch", "state",
                              "timeout_ms", "partitions")} == {
        "coordinator": 1, "producer_id": pid, "producer_epoch": 0, "state": "Ongoing",
        "timeout_ms": 42000, "partitions": [f"{topic}-0"]}
