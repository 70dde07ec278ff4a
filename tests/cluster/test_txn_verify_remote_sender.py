# The verifier's own rules (cluster/txn_verifier.py), against one real kafkalite broker
# standing for the coordinator broker, the cluster's state scripted (ScriptedView as in
# test_txn_markers_remote.py): the coordinator's answers as Kafka's AddPartitionsToTxnManager
# passes them on, transactions waiting for one coordinator sent together in one request, a
# second verification of the same id answering the first (Kafka's epoch rules), no
# coordinator or a broken connection answered without a request.
from __future__ import annotations

import asyncio
import socket
import uuid
from types import SimpleNamespace

from kafkalite.cluster.txn_verifier import TxnVerifier
from kafkalite.cluster.view import NO_NODE, BrokerNode, PartitionState
from kafkalite.wire.errors import ErrorCode as E
from tests.helpers.real_kafka import create_topic
from tests.integration.test_txn_coordinator_wire import Wire, find_txn_coordinator, init_ok

CONFIG = {"replica.socket.timeout.ms": 5000}


class ScriptedView:
    """__transaction_state (3 partitions) led by node 5, the spawned broker at `bootstrap`;
    this broker is node 9."""
    node_id = 9

    def __init__(self, bootstrap: str, leader: int = 5):
        host, port = bootstrap.rsplit(":", 1)
        self.node = BrokerNode(5, host, int(port))
        self.leader = leader

    def topic(self, name: str):
        return SimpleNamespace(assignment=SimpleNamespace(partitions={0: [5], 1: [5], 2: [5]}))

    def partition(self, topic: str, partition: int) -> PartitionState:
        return PartitionState(self.leader, 0, (5,), (5,))

    def broker(self, node_id: int, listener) -> BrokerNode | None:
        return self.node if node_id == 5 else None


class CountingVerifier(TxnVerifier):
    """Records the transactional ids of each request sent."""

    def __init__(self, view: ScriptedView):
        super().__init__(SimpleNamespace(node_id=9), view, CONFIG)
        self.sent: list[list[str]] = []

    async def _send(self, node, batch):
        self.sent.append(sorted(batch))
        return await super()._send(node, batch)


def run(view: ScriptedView, calls) -> tuple[list, list]:
    """Each (txn id, pid, epoch, partitions) verified at once; (answers, requests sent)."""
    async def go():
        v = CountingVerifier(view)
        try:
            answers = await asyncio.gather(*(v.verify(*c) for c in calls))
            return list(answers), v.sent
        finally:
            v.close()
    return asyncio.run(go())


def transaction(bootstrap: str, topic: str, added: bool) -> tuple[str, int, int]:
    txn = f"v-{uuid.uuid4().hex[:8]}"
    w = Wire(bootstrap)
    try:
        find_txn_coordinator(w, txn)
        pid, epoch = init_ok(w, txn)
        if added:
            w.add(txn, pid, epoch, {topic: [0]})
    finally:
        w.close()
    return txn, pid, epoch


def test_answers_and_batching(broker_process):
    topic = f"t-{uuid.uuid4().hex[:6]}"
    create_topic(broker_process.bootstrap, topic)
    view = ScriptedView(broker_process.bootstrap)
    t1, p1, e1 = transaction(broker_process.bootstrap, topic, added=True)
    t2, p2, e2 = transaction(broker_process.bootstrap, topic, added=False)
    answers, sent = run(view, [(t1, p1, e1, [(topic, 0)]), (t2, p2, e2, [(topic, 0)]),
                               (t1 + "x", p1, e1, [(topic, 0)])])
    assert answers == [{}, {(topic, 0): E.transaction_abortable},
                       {(topic, 0): E.invalid_producer_id_mapping}]
    assert sent == [sorted([t1, t2, t1 + "x"])]  # one request for the three
    # the coordinator's PRODUCER_FENCED as INVALID_PRODUCER_EPOCH
    answers, _ = run(view, [(t1, p1, e1 + 1, [(topic, 0)])])
    assert answers == [{(topic, 0): E.invalid_producer_epoch}]


def test_the_same_id_twice_answers_the_older_one(broker_process):
    topic = f"t-{uuid.uuid4().hex[:6]}"
    create_topic(broker_process.bootstrap, topic)
    view = ScriptedView(broker_process.bootstrap)
    txn, pid, epoch = transaction(broker_process.bootstrap, topic, added=True)
    tp = [(topic, 0)]
    answers, sent = run(view, [(txn, pid, epoch, tp), (txn, pid, epoch, tp)])
    assert answers == [{tp[0]: E.network_exception}, {}] and sent == [[txn]]
    answers, sent = run(view, [(txn, pid, epoch - 1, tp), (txn, pid, epoch, tp)])
    assert answers == [{tp[0]: E.invalid_producer_epoch}, {}] and sent == [[txn]]
    answers, sent = run(view, [(txn, pid, epoch, tp), (txn, pid, epoch - 1, tp)])
    assert answers == [{}, {tp[0]: E.invalid_producer_epoch}] and sent == [[txn]]


def test_no_coordinator_or_no_connection(broker_process):
    tp = [("t", 0)]
    answers, sent = run(ScriptedView(broker_process.bootstrap, leader=NO_NODE),
                        [("a", 1, 0, tp)])
    assert answers == [{tp[0]: E.coordinator_not_available}] and sent == []
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    answers, sent = run(ScriptedView(closed), [("a", 1, 0, tp)])
    assert answers == [{tp[0]: E.network_exception}] and sent == [["a"]]
