# kafka-transactions.sh find-hanging and abort (Kafka 3.8.0's tool: DescribeProducers, then
# ListTransactions/DescribeTransactions, then WriteTxnMarkers to the partition leader) and
# `kafkalite transactions abort`, against kafkalite and the real Kafka, each with a
# transaction left open over raw requests (added to the coordinator, a transactional batch
# written, never ended). The outputs must match after masking, and after the abort the LSO
# has moved past the transaction on both.
from __future__ import annotations

import subprocess
import sys

from tests.helpers.real_kafka import create_topic
from tests.integration.test_txn_coordinator_wire import Wire, find_txn_coordinator, init_ok
from tests.integration.test_txn_log import latest
from tests.integration.test_write_txn_markers import produce, producers, txn_batch
from tests.kafka_tools.conftest import normalise, run_tool


def open_transaction(bootstrap: str, topic: str) -> tuple[int, int]:
    """A transaction of `tx-<topic>` with records 0-1 of the topic's partition 0, left open;
    (producer id, epoch 1: initialised twice, so that epoch 0 is an older one)."""
    create_topic(bootstrap, topic)
    txn = f"tx-{topic}"
    w = Wire(bootstrap)
    try:
        find_txn_coordinator(w, txn)
        init_ok(w, txn)
        pid, epoch = init_ok(w, txn)
        w.add(txn, pid, epoch, {topic: [0]})
        assert produce(bootstrap, txn, topic, txn_batch(pid, epoch, 0, [b"a", b"b"])) == 0
        assert producers(w, topic)[pid][2] == 0
    finally:
        w.close()
    return pid, epoch


def tool_abort(bootstrap: str, topic: str) -> dict[str, str]:
    open_transaction(bootstrap, topic)
    # The batch is stamped 10 minutes ago: a candidate for --max-transaction-timeout 1, but
    # not hanging while the coordinator holds the partition in its transaction.
    hanging = run_tool("kafka-transactions.sh", "--bootstrap-server", bootstrap,
                       "find-hanging", "--topic", topic, "--max-transaction-timeout", "1")
    assert latest(bootstrap, topic, committed=True) == 0
    aborted = run_tool("kafka-transactions.sh", "--bootstrap-server", bootstrap, "abort",
                       "--topic", topic, "--partition", "0", "--start-offset", "0")
    lso = latest(bootstrap, topic, committed=True)
    after = run_tool("kafka-transactions.sh", "--bootstrap-server", bootstrap,
                     "find-hanging", "--broker-id", "1")
    return {"find-hanging": normalise(hanging, bootstrap), "abort": normalise(aborted, bootstrap),
            "lso": str(lso), "after": normalise(after, bootstrap)}


def test_kafka_transactions_find_hanging_and_abort(both: dict[str, str]) -> None:
    lite, kafka = (tool_abort(both[n], "tools-txn-abort") for n in ("kafkalite", "kafka"))
    assert lite == kafka
    assert kafka["lso"] == "3"  # records 0-1, the ABORT marker at 2
    assert kafka["find-hanging"].split() == ["Topic", "Partition", "ProducerId",
                                             "ProducerEpoch", "CoordinatorEpoch",
                                             "StartOffset", "LastTimestamp", "Duration(min)"]


def cli_abort(bootstrap: str, topic: str) -> dict:
    pid, epoch = open_transaction(bootstrap, topic)
    w = Wire(bootstrap)
    try:
        _, coordinator_epoch, _ = producers(w, topic)[pid]

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "kafkalite", "transactions", "abort",
                                   "--bootstrap-server", bootstrap, "--topic", topic,
                                   "--partition", "0", "--producer-id", str(pid),
                                   "--coordinator-epoch", str(coordinator_epoch), *args],
                                  capture_output=True, text=True, timeout=60)
        stale = cli("--producer-epoch", str(epoch - 1))
        done = cli("--producer-epoch", str(epoch))
        return {"stale": (stale.returncode, "InvalidProducerEpoch" in stale.stderr
                          or "INVALID_PRODUCER_EPOCH" in stale.stderr.upper()),
                "done": (done.returncode, done.stdout.replace(str(pid), "<pid>")),
                "lso": latest(bootstrap, topic, committed=True),
                "open": producers(w, topic)[pid][2]}
    finally:
        w.close()


def test_kafkalite_transactions_abort(both: dict[str, str]) -> None:
    lite, kafka = (cli_abort(both[n], "tools-txn-cli") for n in ("kafkalite", "kafka"))
    assert lite == kafka
    assert kafka["done"] == (0, "Aborted the transaction of producer <pid> in tools-txn-cli-0\n")
    assert (kafka["lso"], kafka["open"]) == (3, -1)
