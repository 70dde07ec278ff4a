# KIP-890 part 1 verification with a transaction coordinator on another broker (issue 17), as
# Kafka 3.8's AddPartitionsToTxnManager: a partition leader asks the coordinator of the
# transactional id (the leader of its __transaction_state partition, abs(javaHashCode(id)) %
# partitions, read from the cluster view) with AddPartitionsToTxn v4 verify_only=true.
# Requests to one coordinator are batched: one in flight per broker, the transactions that
# arrive meanwhile go together in the next one, over one inter-broker connection per broker
# (inter_broker.py, as the marker sender's). The answers are Kafka's manager's, before the
# callers' own translations (produce.py, txn_offset_commit.py):
#   no __transaction_state, its partition leaderless or its leader not live:
#     COORDINATOR_NOT_AVAILABLE, nothing sent;
#   a second verification of the same transactional id while one waits to be sent: the older
#     one gets NETWORK_EXCEPTION (same epoch) or INVALID_PRODUCER_EPOCH (a newer epoch came), a
#     newcomer with an older epoch INVALID_PRODUCER_EPOCH;
#   a broken connection or no answer within the timeout: NETWORK_EXCEPTION;
#   a top-level error for every partition (CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE);
#   per partition PRODUCER_FENCED as INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE is left to
#     the callers, which answer it only to the versions that know it (abortable()).
# Only the unverified partitions are returned: {} means the whole batch is verified.
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..coordinator.offsets_log import partition_for
from ..wire.errors import ErrorCode
from .inter_broker import Channel, InterBroker
from .view import NO_NODE

log = logging.getLogger("kafkalite.transactions")

ADD_PARTITIONS_TO_TXN, VERSION = 24, 4
TXN_TOPIC = "__transaction_state"
TP = tuple[str, int]


@dataclass
class _Waiting:
    producer_id: int
    epoch: int
    partitions: list[TP]
    done: asyncio.Future = field(repr=False)


def _answer(waiting: _Waiting, answer: dict[TP, ErrorCode]) -> None:
    if not waiting.done.done():
        waiting.done.set_result(answer)


def partition_errors(code: int) -> ErrorCode:
    """A partition's answer as Kafka's manager passes it on ("Producers expect to handle
    INVALID_PRODUCER_EPOCH")."""
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode(code)


def abortable(code: ErrorCode, knows_abortable: bool) -> ErrorCode:
    """TRANSACTION_ABORTABLE for a client version that reads it, else INVALID_TXN_STATE (the
    manager's "backward compatibility with clients")."""
    if code == ErrorCode.transaction_abortable and not knows_abortable:
        return ErrorCode.invalid_txn_state
    return code


async def verify(broker: Any, txn_id: str, producer_id: int, epoch: int,
                 partitions: list[TP]) -> dict[TP, ErrorCode]:
    """The unverified partitions, by this broker's transaction coordinator or the one on
    another broker (Kafka's manager asks even its own broker, so both answer alike)."""
    verifier = getattr(broker, "txn_verifier", None)
    if verifier is not None and verifier.is_remote(txn_id):
        return await verifier.verify(txn_id, producer_id, epoch, partitions)
    answers = broker.transactions.verify(txn_id, producer_id, epoch, partitions)
    return {tp: partition_errors(e) for tp, e in answers.items() if e != ErrorCode.none}


class TxnVerifier:
    """This broker's verify-only AddPartitionsToTxn client (one per broker, in a cluster)."""

    def __init__(self, broker: Any, view: Any, config: Any):
        from kio.schema.add_partitions_to_txn.v4 import request as request_module
        self.mod = request_module
        self.view = view
        self.client_id = f"broker-{broker.node_id}-txn-verifier"
        # Kafka's request.timeout.ms for this channel; kafkalite has the replicas' one
        self.timeout_s: float = config["replica.socket.timeout.ms"] / 1000
        self.inter_broker: InterBroker = getattr(broker, "inter_broker", None) or InterBroker()
        self._waiting: dict[int, dict[str, _Waiting]] = {}
        self._senders: dict[int, asyncio.Task] = {}
        self._channels: dict[int, Channel] = {}

    def coordinator(self, txn_id: str) -> int:
        """The broker leading `txn_id`'s __transaction_state partition; NO_NODE if none is
        live (or the topic does not exist)."""
        topic = self.view.topic(TXN_TOPIC)
        if topic is None or not topic.assignment.partitions:
            return NO_NODE
        state = self.view.partition(TXN_TOPIC, partition_for(
            txn_id, len(topic.assignment.partitions)))
        if state is None or state.leader == NO_NODE or \
                self.view.broker(state.leader, self.inter_broker.listener) is None:
            return NO_NODE
        return state.leader

    def is_remote(self, txn_id: str) -> bool:
        """Whether `txn_id` is not coordinated here: verified by verify(), not locally."""
        return self.coordinator(txn_id) != self.view.node_id

    async def verify(self, txn_id: str, producer_id: int, epoch: int,
                     partitions: Iterable[TP]) -> dict[TP, ErrorCode]:
        """The unverified partitions of the producer's transaction, with their errors."""
        partitions = list(partitions)
        node = self.coordinator(txn_id)
        if node == NO_NODE:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        batch = self._waiting.setdefault(node, {})
        older = batch.get(txn_id)
        if older is not None:
            if older.epoch > epoch:
                return dict.fromkeys(partitions, ErrorCode.invalid_producer_epoch)
            _answer(older, dict.fromkeys(older.partitions, ErrorCode.network_exception
                                         if older.epoch == epoch
                                         else ErrorCode.invalid_producer_epoch))
        waiting = _Waiting(producer_id, epoch, partitions,
                           asyncio.get_running_loop().create_future())
        batch[txn_id] = waiting
        if node not in self._senders:
            self._senders[node] = asyncio.ensure_future(self._send_all(node))
        return await asyncio.shield(waiting.done)

    async def _send_all(self, node: int) -> None:
        """Sends what waits for `node`, one request at a time, until nothing waits."""
        try:
            while self._waiting.get(node):
                batch = self._waiting.pop(node)
                try:
                    answers = await self._send(node, batch)
                except asyncio.CancelledError:  # closing: nobody is left waiting
                    for w in batch.values():
                        _answer(w, dict.fromkeys(w.partitions, ErrorCode.network_exception))
                    raise
                except (OSError, EOFError, asyncio.TimeoutError, ConnectionError) as e:
                    log.info("AddPartitionsToTxn (verify) to broker %d failed: %r", node, e)
                    self._drop(node)
                    answers = {t: dict.fromkeys(w.partitions, ErrorCode.network_exception)
                               for t, w in batch.items()}
                for txn_id, waiting in batch.items():  # one left unanswered: not verified
                    _answer(waiting, answers.get(txn_id, dict.fromkeys(
                        waiting.partitions, ErrorCode.network_exception)))
        finally:
            self._senders.pop(node, None)

    async def _send(self, node: int, batch: dict[str, _Waiting]
                    ) -> dict[str, dict[TP, ErrorCode]]:
        mod = self.mod
        txns = []
        for txn_id, w in batch.items():
            by_topic: dict[str, list[int]] = {}
            for topic, idx in w.partitions:
                by_topic.setdefault(topic, []).append(idx)
            txns.append(mod.AddPartitionsToTxnTransaction(
                transactional_id=txn_id, producer_id=w.producer_id, producer_epoch=w.epoch,
                verify_only=True, topics=tuple(mod.AddPartitionsToTxnTopic(
                    name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
        channel = self._channels.get(node)
        if channel is None:
            channel = self._channels[node] = await self.inter_broker.open(
                self.view, node, self.client_id, self.timeout_s)
        resp = await channel.call(ADD_PARTITIONS_TO_TXN, VERSION,
                                  mod.AddPartitionsToTxnRequest(transactions=tuple(txns)),
                                  self.timeout_s)
        if resp.error_code != ErrorCode.none:
            top = ErrorCode.invalid_txn_state \
                if resp.error_code == ErrorCode.cluster_authorization_failed \
                else ErrorCode(resp.error_code)
            return {t: dict.fromkeys(w.partitions, top) for t, w in batch.items()}
        out: dict[str, dict[TP, ErrorCode]] = {}
        for result in resp.results_by_transaction:
            out[result.transactional_id] = {
                (t.name, p.partition_index): partition_errors(p.partition_error_code)
                for t in result.topic_results for p in t.results_by_partition
                if p.partition_error_code != ErrorCode.none}
        return out

    def close(self) -> None:
        for task in list(self._senders.values()):
            task.cancel()
        for batch in self._waiting.values():
            for waiting in batch.values():
                _answer(waiting, dict.fromkeys(waiting.partitions,
                                               ErrorCode.network_exception))
        self._waiting.clear()
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def _drop(self, node: int) -> None:
        channel = self._channels.pop(node, None)
        if channel is not None:
            channel.close()
