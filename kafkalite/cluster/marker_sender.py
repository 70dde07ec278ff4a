# Transaction markers in a ZooKeeper cluster (issue 17), as Kafka's
# TransactionMarkerChannelManager: the transaction coordinator's COMMIT/ABORT marker goes to
# each partition's leader. Partitions led here take the local path (broker/txn_markers.py);
# the others are grouped by their leader and sent one WriteTxnMarkers v1 per leader (the
# coordinator epoch is the __transaction_state partition's leader epoch, as the coordinator
# passes it). A leader that moved (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION while
# the cluster still knows the partition), an offline leader or a broken connection is retried
# a bounded number of times with backoff, the leader re-read from the view each round; what
# is still unwritten after that is reported and the coordinator retries it at its next tick.
# A partition the cluster does not know (deleted) is reported UNKNOWN_TOPIC_OR_PARTITION and
# needs no marker, as Kafka skips partitions missing from its metadata cache.
#
# Markers go over the inter-broker connection (inter_broker.py: the leader's endpoint of the
# inter-broker listener, with its TLS and SASL), as the replica fetcher's; a failed login is
# a broken connection, retried as one.
#
# The leader answers WriteTxnMarkers only once its followers have the marker (an acks=-1
# append, as Kafka's). Gap: one request at a time per broker, so a marker waiting for a slow
# ISR holds back the other markers bound for that broker (Kafka's channel pipelines them).
from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable

from ..wire.errors import ErrorCode
from .inter_broker import Channel, InterBroker
from .view import NO_NODE

log = logging.getLogger("kafkalite.transactions")

WRITE_TXN_MARKERS, VERSION = 27, 1
ATTEMPTS = 6
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.1, 1.0
# the leader moved or is not ready yet: ask the view again
RETRIABLE = {ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
             ErrorCode.leader_not_available, ErrorCode.not_enough_replicas,
             ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
             ErrorCode.network_exception, ErrorCode.kafka_storage_error}

TP = tuple[str, int]


class MarkerSender:
    """The coordinator's marker writer in a cluster: local or by WriteTxnMarkers."""

    def __init__(self, broker: Any, view: Any, config: Any):
        from kio.schema.write_txn_markers.v1 import request as request_module
        self.broker = broker
        self.view = view
        self.request_module = request_module
        self.client_id = f"broker-{broker.node_id}-txn-markers"
        # Kafka's request.timeout.ms (30 s) for this channel; kafkalite has the replicas' one
        self.timeout_s: float = config["replica.socket.timeout.ms"] / 1000
        self.inter_broker: InterBroker = getattr(broker, "inter_broker", None) or InterBroker()
        self._channels: dict[int, Channel] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def write(self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool,
                    partitions: Iterable[TP]) -> dict[TP, ErrorCode]:
        """Each partition's marker written on its leader; returns each one's last error."""
        from ..broker.txn_markers import write_markers  # the broker package imports this one
        errors: dict[TP, ErrorCode] = {}
        todo = list(partitions)
        backoff = FIRST_BACKOFF_S
        for attempt in range(ATTEMPTS):
            local: list[TP] = []
            remote: dict[int, list[TP]] = {}
            for tp in todo:
                state = self.view.partition(*tp)
                if state is None:
                    errors[tp] = ErrorCode.unknown_topic_or_partition  # deleted: no marker
                elif state.leader == self.view.node_id:
                    local.append(tp)
                elif state.leader == NO_NODE:
                    errors[tp] = ErrorCode.leader_not_available
                else:
                    remote.setdefault(state.leader, []).append(tp)
            rounds = [self._send(node, tps, producer_id, epoch, coordinator_epoch, commit)
                      for node, tps in remote.items()]
            if local:
                rounds.append(write_markers(self.broker, producer_id, epoch,
                                            coordinator_epoch, commit, local))
            for answer in await asyncio.gather(*rounds):
                errors.update(answer)
            todo = [tp for tp in todo if self._retriable(tp, errors[tp])]
            if not todo or attempt == ATTEMPTS - 1:
                break
            await asyncio.sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)
        for tp in todo:
            if errors[tp] == ErrorCode.unknown_topic_or_partition:
                # the cluster knows it: not a deleted partition, so the coordinator retries
                errors[tp] = ErrorCode.not_leader_or_follower
            log.warning("Marker of producer %d not written to %s-%d: %s", producer_id, *tp,
                        errors[tp].name)
        return errors

    def _retriable(self, tp: TP, err: ErrorCode) -> bool:
        if err == ErrorCode.unknown_topic_or_partition:
            return self.view.partition(*tp) is not None
        return err in RETRIABLE

    async def _send(self, node: int, tps: list[TP], producer_id: int, epoch: int,
                    coordinator_epoch: int, commit: bool) -> dict[TP, ErrorCode]:
        mod = self.request_module
        by_topic: dict[str, list[int]] = {}
        for topic, idx in tps:
            by_topic.setdefault(topic, []).append(idx)
        req = mod.WriteTxnMarkersRequest(markers=(mod.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, topics=tuple(
                mod.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                for t, ps in by_topic.items())),))
        lock = self._locks.setdefault(node, asyncio.Lock())
        async with lock:  # one request at a time on a connection
            try:
                channel = self._channels.get(node)
                if channel is None:
                    channel = self._channels[node] = await self.inter_broker.open(
                        self.view, node, self.client_id, self.timeout_s)
                resp = await channel.call(WRITE_TXN_MARKERS, VERSION, req, self.timeout_s)
            except (OSError, EOFError, asyncio.TimeoutError, ConnectionError) as e:
                log.info("WriteTxnMarkers to broker %d failed: %r; will retry", node, e)
                self._drop(node)
                return {tp: ErrorCode.network_exception for tp in tps}
        out = {tp: ErrorCode.network_exception for tp in tps}  # a partition left unanswered
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    def _drop(self, node: int) -> None:
        channel = self._channels.pop(node, None)
        if channel is not None:
            channel.close()

    def close(self) -> None:
        for node in list(self._channels):
            self._drop(node)
