# Transaction markers (txn_spec.md 1): the transaction coordinator ends a transaction by
# appending one COMMIT or ABORT control batch to each of its partitions, as Kafka's
# WriteTxnMarkers does on each leader (here a local append for the partitions this broker
# leads; in a cluster the others' go to their leaders by cluster/marker_sender.py). The
# WriteTxnMarkers handler (an admin's abort, another broker's coordinator) writes through here
# too; a partition held here but led elsewhere answers NOT_LEADER_OR_FOLLOWER.
#
# Each marker goes through the partition's append path (offsets, indexes, roll), ends the
# producer's ongoing transaction in the producer state (the LSO moves), and for an ABORT that
# ended a transaction with data here adds the segment's `.txnindex` entry. The markers are
# then made durable as a Produce with acks=all is (flush.messages, and
# kafkalite.fsync.before.ack through broker.sync), and only after that are long polls woken
# (in a cluster: followers' fetches; consumers read below the high watermark). In a ZooKeeper
# cluster a marker is also an acks=-1 append, as Kafka's: below min.insync.replicas nothing is
# appended (NOT_ENOUGH_REPLICAS), else its answer waits for the high watermark to pass it
# (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT after Kafka's
# request.timeout.ms). Then the listeners are told (TX-C's pending transactional offsets
# become visible at a COMMIT): nothing is shown that a crash or a failover could take back.
# A partition that failed is reported, and the coordinator writes its marker again later; a
# second marker is harmless, as in Kafka (it finds no open transaction and changes nothing
# but the producer's timestamps).
from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterable

from ..log.errors import LogError
from ..log.flusher import wait_durable
from ..wire.batch_builder import build_marker
from ..wire.errors import ErrorCode, KafkaError
from ..wire.records import parse_header
from .handlers._storage import log_error_code

log = logging.getLogger("kafkalite.transactions")

REPLICATION_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms, the marker append's timeout


async def write_markers(broker, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, partitions: Iterable[tuple[str, int]]
                        ) -> dict[tuple[str, int], ErrorCode]:
    """Append the transaction's marker to each partition (see the module comment); returns
    each partition's error (UNKNOWN_TOPIC_OR_PARTITION for one that is gone)."""
    now = int(time.time() * 1000)
    errors: dict[tuple[str, int], ErrorCode] = {}
    written = []
    replication = broker.replication  # None on a single node
    waits: dict = {}
    for topic, idx in partitions:
        p = broker.logs.partition(topic, idx)
        if p is None:
            errors[(topic, idx)] = ErrorCode.unknown_topic_or_partition
            continue
        if not broker.view.is_leader(topic, idx):  # a follower's replica (a cluster)
            errors[(topic, idx)] = ErrorCode.not_leader_or_follower
            continue
        code = replication.produce_error(topic, idx) if replication is not None else 0
        if code:  # min.insync.replicas, before anything is appended
            errors[(topic, idx)] = ErrorCode(code)
            continue
        try:
            _append_marker(broker, p, producer_id, producer_epoch, coordinator_epoch, commit,
                           now)
        except KafkaError as e:
            errors[(topic, idx)] = e.code
            continue
        except LogError as e:
            errors[(topic, idx)] = log_error_code(e, f"{topic}-{idx}")
            continue
        errors[(topic, idx)] = ErrorCode.none
        written.append(p)
        if replication is not None:
            waits[p] = replication.wait_acks(topic, idx, p.log_end_offset)
    try:
        for p in written:
            fut = p.take_ack_flush()
            if fut is not None:
                await wait_durable(fut, f"flush of {p.topic}-{p.partition}")
        if written and broker.config["kafkalite.fsync.before.ack"]:
            await broker.sync(written)
    except OSError as e:
        log.error("Transaction markers not made durable: %s", e)
        for p in written:
            errors[(p.topic, p.partition)] = ErrorCode.kafka_storage_error
        return errors
    for p in written:  # followers' fetches and the HW of a one-replica ISR move on
        broker.notifier.notify(p.topic, p.partition)
    if waits:
        written = await _replicated(waits, errors)
    for p in written:
        for listener in list(broker.txn_marker_listeners):
            try:
                listener(p.topic, p.partition, producer_id, commit)
            except Exception:  # one listener's bug must not fail the others or the marker
                log.exception("Transaction marker listener failed for %s-%d", p.topic,
                              p.partition)
    return errors


async def _replicated(waits: dict, errors: dict) -> list:
    """The partitions whose marker the ISR has (Kafka's DelayedProduce); the others get
    the error their wait ended with in `errors`."""
    futs = [f for f in waits.values() if f is not None]
    if futs:
        await asyncio.wait(futs, timeout=REPLICATION_TIMEOUT_S)
    done = []
    for p, fut in waits.items():
        code = ErrorCode.not_leader_or_follower if fut is None else \
            ErrorCode(fut.result()) if fut.done() else ErrorCode.request_timed_out
        if fut is not None and not fut.done():
            fut.cancel()
        if code == ErrorCode.none:
            done.append(p)
        else:
            errors[(p.topic, p.partition)] = code
    return done


def _append_marker(broker, p, producer_id: int, epoch: int, coordinator_epoch: int,
                   commit: bool, now: int) -> None:
    state = broker.producer_state(p)
    state.check_marker(producer_id, epoch)
    entry = state.producers.get(producer_id)
    if entry is not None and entry.coordinator_epoch > coordinator_epoch:
        # ProducerAppendInfo.checkCoordinatorEpoch, after the epoch check as there: a marker
        # from a coordinator older than the last one that wrote here (a zombie, or an
        # admin's abort naming a stale epoch).
        raise KafkaError(ErrorCode.transaction_coordinator_fenced,
                         f"Invalid coordinator epoch for producer {producer_id} in "
                         f"{p.topic}-{p.partition}: {coordinator_epoch} (zombie), "
                         f"{entry.coordinator_epoch} (current)")
    batch = build_marker(producer_id, epoch, commit, coordinator_epoch, now)
    h = parse_header(batch)
    offset = p.append(batch, h, now,
                      leader_epoch=broker.view.leader_epoch(p.topic, p.partition))
    done = state.end(producer_id, epoch, coordinator_epoch, offset,
                     now if p.config.log_append_time else h.max_timestamp)
    if done is not None and not commit:
        first, lso = done
        p.append_aborted(producer_id, first, offset, lso)
