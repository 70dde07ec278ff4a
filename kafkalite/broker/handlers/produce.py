# Produce (key 0), v0-11 advertised, v3-11 served.
#
# v0-2 stay advertised because librdkafka disables compression unless Produce v0 is listed
# (KAFKA-18659); like Kafka 4, they are answered with UNSUPPORTED_VERSION. Each partition
# carries exactly one v2 batch, validated by its header and CRC32C and appended as bytes
# (offsets assigned by rewriting its first 16 bytes; recompressed only as below).
# LogAppendTime topics get the batch's maxTimestamp rewritten and a new CRC. Idempotent
# batches (producerId >= 0) are sequence-checked: duplicates answer their original offset.
# acks=0 sends no response; if any partition failed, the connection is closed so the client
# refreshes metadata (as Kafka). acks=-1 with kafkalite.fsync.before.ack fsyncs first, and
# an append that reaches flush.messages is answered once that flush is done (as in Kafka).
# A storage failure answers KAFKA_STORAGE_ERROR for its partition only.
# zstd batches below v7 get UNSUPPORTED_COMPRESSION_TYPE, as in Kafka's
# ProduceRequest.validateRecords. Produce never auto-creates topics (Metadata does).
# Record-level errors (v8+, KIP-467) name each refused record, as Kafka's: keyless records
# in a compacted topic (INVALID_RECORD), records out of the timestamp bounds
# (INVALID_TIMESTAMP). Records are read only on compacted topics, when the batch header's
# timestamps are out of range, or with kafkalite.produce.validate.records (record_checks.py).
# A transaction's first batch in a partition (attributes bit 4, the producer with no ongoing
# transaction there) is first verified with the transaction coordinator (KIP-890 part 1, as
# Kafka 3.8) for the request's transactional_id, before anything is appended: this broker's
# coordinator, or in a cluster the one on another broker by AddPartitionsToTxn v4 verify_only
# (cluster/txn_verifier.py). A producer
# id that id does not hold is INVALID_PRODUCER_ID_MAPPING, a partition not in its ongoing
# transaction INVALID_TXN_STATE (v11: TRANSACTION_ABORTABLE, as Kafka 3.8 answers that version),
# another epoch INVALID_PRODUCER_EPOCH, a transaction being completed, the coordinator loading,
# unknown, not live or not answering NOT_ENOUGH_REPLICAS, retriable, as Kafka's
# ReplicaManager turns CONCURRENT_TRANSACTIONS into; then sequence and epoch are checked as for
# idempotence, and the batch opens the producer's transaction in the partition (the LSO
# stops there until its marker). A non-transactional batch from a producer whose
# transaction is open in the partition is INVALID_TXN_STATE, as Kafka's ProducerAppendInfo.
# None of this runs for a batch without the transactional bit. A request with transactional
# batches but no transactional_id is refused whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
# (Kafka's KafkaApis checks that before anything else), as is one whose principal may not
# WRITE its transactional id; a topic it may not WRITE answers TOPIC_AUTHORIZATION_FAILED
# for each partition.
# A topic whose compression.type is not `producer` gets batches in another codec recompressed
# (wire/recompress.py, as Kafka's LogValidator), then MESSAGE_TOO_LARGE past max.message.bytes,
# then RECORD_LIST_TOO_LARGE for a batch larger than the topic's segment.bytes.
# In a cluster (zookeeper.connect) a partition this broker does not lead answers
# NOT_LEADER_OR_FOLLOWER (the cluster view's leadership; Produce carries no leader epoch).
# Replication (cluster/replication.py): acks=-1 first checks the ISR against the topic's
# min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing appended), then waits until the high
# watermark passes the appended batch (Kafka's DelayedProduce): REQUEST_TIMED_OUT after the
# request's timeout (also when the ISR shrank below min.insync.replicas meanwhile: as in
# Kafka 3.8 the HW then stays), NOT_ENOUGH_REPLICAS_AFTER_APPEND for a batch the HW had
# passed with the ISR below it, NOT_LEADER_OR_FOLLOWER when the leadership moved. acks=1
# answers after the local append.
# Gaps: timestamp bounds are checked on the batch's base
# and max timestamps, so a record earlier than the first one can pass.
from __future__ import annotations

import asyncio
import struct
import time

from ...cluster.txn_verifier import abortable, verify
from ...cluster.view import NO_EPOCH
from ...log.flusher import wait_durable
from ...wire.errors import ErrorCode, KafkaError, MalformedRequest
from ...wire.primitives import EMPTY_TAGS, array_len, string
from ...wire.recompress import recompress
from ...wire.records import TRANSACTIONAL_BIT, validate_produce_batch
from ..build import to_ms
from ..quotas import PRODUCE
from ..record_checks import RecordErrors, check_records
from ..registry import api
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType
from ._storage import LogError, log_error_code

_P3 = struct.Struct(">ihqq")     # index, error, base offset, log append time
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NO_RECORD_ERRORS: tuple = ()
_PID_EPOCH = struct.Struct(">qh")  # a v2 batch header's producer id and epoch, at 43
_HEADER_END = 61
# ReplicaManager's translation of a verification failure for producers: the retriable ones
# that older clients may not retry become NOT_ENOUGH_REPLICAS (no metadata refresh)
_FOR_PRODUCE = dict.fromkeys((ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                              ErrorCode.coordinator_load_in_progress,
                              ErrorCode.coordinator_not_available,
                              ErrorCode.not_coordinator), ErrorCode.not_enough_replicas)
ZSTD = 4


def _partition_result(idx: int, code: int, base: int = -1, append_time: int = -1,
                      start: int = -1, message: str | None = None,
                      record_errors: tuple | list = _NO_RECORD_ERRORS) -> tuple:
    return idx, code, base, append_time, start, message, record_errors


def _error_result(idx: int, e: KafkaError) -> tuple:
    errors = e.record_errors if isinstance(e, RecordErrors) else _NO_RECORD_ERRORS
    return _partition_result(idx, e.code, message=e.message, record_errors=errors)


def encode_response(version: int, results: list[tuple[str, list[tuple]]],
                    throttle_ms: int = 0) -> bytes:
    flex = version >= 9
    out = [array_len(len(results), flex)]
    for name, parts in results:
        out.append(string(name, flex))
        out.append(array_len(len(parts), flex))
        for idx, code, base, append_time, start, message, *more in parts:
            out.append(_P3.pack(idx, code, base, append_time))
            if version >= 5:
                out.append(_I64.pack(start))
            if version >= 8:
                record_errors = more[0] if more else _NO_RECORD_ERRORS
                out.append(array_len(len(record_errors), flex))
                for batch_index, error_message in record_errors:
                    out.append(_I32.pack(batch_index))
                    out.append(string(error_message, flex))
                    if flex:
                        out.append(EMPTY_TAGS)
                out.append(string(message, flex))
            if flex:
                out.append(EMPTY_TAGS)
        if flex:
            out.append(EMPTY_TAGS)
    out.append(_I32.pack(throttle_ms))
    if flex:
        out.append(EMPTY_TAGS)
    return b"".join(out)


def legacy_response(frame: bytes, pos: int, version: int) -> bytes:
    """UNSUPPORTED_VERSION for every partition of a v0-2 request."""
    try:
        pos += 6  # acks, timeout
        (nt,) = _I32.unpack_from(frame, pos)
        pos += 4
        out = [_I32.pack(nt)]
        for _ in range(nt):
            (nlen,) = struct.unpack_from(">h", frame, pos)
            name = bytes(frame[pos:pos + 2 + nlen])
            pos += 2 + nlen
            (np,) = _I32.unpack_from(frame, pos)
            pos += 4
            out.append(name + _I32.pack(np))
            for _ in range(np):
                idx, rlen = struct.unpack_from(">ii", frame, pos)
                pos += 8 + max(rlen, 0)
                out.append(struct.pack(">ihq", idx, ErrorCode.unsupported_version, -1))
                if version >= 2:
                    out.append(_I64.pack(-1))
        if version >= 1:
            out.append(_I32.pack(0))
        return b"".join(out)
    except struct.error:
        raise MalformedRequest(f"truncated Produce v{version} request") from None


def append_batch(broker, topic: str, p, idx: int, records: bytes, now: int,
                 version: int = 11, txn_id: str | None = None,
                 verified: dict | None = None) -> tuple:
    """Validate and append one partition's batch; returns its partition result."""
    h = validate_produce_batch(records, p.config.max_message_bytes)
    if h.compression == ZSTD and version < 7:
        # ProduceRequest.validateRecords: zstd needs Produce v7+ (KIP-110).
        raise KafkaError(ErrorCode.unsupported_compression_type,
                         "zstd-compressed batches need Produce v7 or later")
    check_records(records, h, p.config, now, topic, idx,
                  broker.config["kafkalite.produce.validate.records"])
    target = p.config.compression
    if target is not None and h.compression != target[0]:
        records, h = recompress(records, h, *target)
        if len(records) > p.config.max_message_bytes:
            raise KafkaError(ErrorCode.message_too_large,
                             f"recompressed batch of {len(records)} bytes exceeds "
                             f"max.message.bytes {p.config.max_message_bytes}")
    if len(records) > p.config.segment_bytes:
        # UnifiedLog.append's RecordBatchTooLargeException, after validation and before the
        # producer state; Kafka answers the code without its message
        raise KafkaError(ErrorCode.record_list_too_large)
    transactional = h.attributes & TRANSACTIONAL_BIT
    state = broker.producer_state(p) if h.producer_id >= 0 else None
    if transactional and (state is None or h.producer_id not in state.ongoing):
        # Only a transaction's first batch in the partition is verified, as Kafka's
        # ReplicaManager asks only when the producer has no ongoing transaction there.
        _verify(broker, txn_id, h, topic, idx, verified)
    if state is not None:
        dup = state.check(h.producer_id, h.producer_epoch, h.base_sequence,
                          h.last_offset_delta)
        if dup is not None:
            return _partition_result(idx, 0, dup, -1, p.log_start_offset)
        if state.ongoing and not transactional:
            state.check_not_in_txn(h.producer_id)
    base = p.append(records, h, now, leader_epoch=broker.view.leader_epoch(topic, idx))
    if state is not None:
        state.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                     base, now if p.config.log_append_time else h.max_timestamp)
        if transactional:
            state.begin(h.producer_id, base)
    broker.notifier.notify(topic, idx)
    broker.stats.produced(topic, len(records), h.records_count)
    return _partition_result(idx, 0, base, now if p.config.log_append_time else -1,
                             p.log_start_offset)


def _has_transactional(req) -> bool:
    """Whether any batch has the transactional bit (one attributes byte per partition)."""
    return any(len(pd.records or b"") > 22 and pd.records[22] & TRANSACTIONAL_BIT
               for td in req.topic_data for pd in td.partition_data)


def _verify(broker, txn_id: str | None, h, topic: str, idx: int,
            verified: dict | None = None) -> None:
    """KIP-890 part 1: the partition must be in the ongoing transaction of the request's
    transactional id, held by the batch's producer id and epoch. `verified`: the answers
    asked before the appends (_verified); a partition not there (its producer's transaction
    ended meanwhile) asks the local coordinator."""
    if h.producer_id < 0:
        raise KafkaError(ErrorCode.invalid_record,
                         "a transactional batch needs a producer id")
    txns = broker.transactions
    if verified is not None and (topic, idx) in verified:
        code = verified[(topic, idx)]
    else:
        code = ErrorCode.invalid_txn_state if txns is None or txn_id is None else \
            txns.verify_produce(txn_id, h.producer_id, h.producer_epoch, topic, idx)
    if code != ErrorCode.none:
        raise KafkaError(code, f"Transactional batch of producer {h.producer_id} refused "
                               f"for {topic}-{idx}")


async def _verified(broker, txn_id: str | None, req, refused: set, version: int) -> dict:
    """{(topic, partition): error} for the transactional batches this broker leads that
    start their producer's transaction in the partition, asked of the transactional id's
    coordinator, here or on another broker (cluster/txn_verifier.py), before anything is
    appended, as Kafka's ReplicaManager does."""
    if txn_id is None or broker.transactions is None:
        return {}
    wanted: dict[tuple[int, int], list] = {}
    for td in req.topic_data:
        topic = broker.logs.get(td.name)
        for pd in td.partition_data:
            records = pd.records or b""
            if len(records) < _HEADER_END or not records[22] & TRANSACTIONAL_BIT or \
                    td.name in refused or topic is None or \
                    not 0 <= pd.index < len(topic.partitions) or \
                    not broker.view.is_leader(td.name, pd.index):
                continue
            pid, epoch = _PID_EPOCH.unpack_from(records, 43)
            if pid >= 0 and pid not in broker.producer_state(topic.partitions[pd.index]).ongoing:
                wanted.setdefault((pid, epoch), []).append((td.name, pd.index))
    out: dict = {}
    for (pid, epoch), tps in wanted.items():
        unverified = await verify(broker, txn_id, pid, epoch, tps)
        for tp in tps:  # TRANSACTION_ABORTABLE from v11 on (measured on Kafka 3.8)
            err = abortable(unverified.get(tp, ErrorCode.none), version > 10)
            out[tp] = _FOR_PRODUCE.get(err, err)
    return out


@api(0, "Produce", (0, 11), decodable_from=3, legacy=legacy_response)
async def handle(ctx, req):
    broker = ctx.broker
    logs = broker.logs
    now = int(time.time() * 1000)
    acks = req.acks
    results: list[tuple[str, list[tuple]]] = []
    touched = []
    failed = False
    txn_id = req.transactional_id
    if (txn_id is None and _has_transactional(req)) or (txn_id is not None and not check(
            ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)):
        return [encode_response(ctx.api_version, [(td.name, [_partition_result(
            pd.index, ErrorCode.transactional_id_authorization_failed)
            for pd in td.partition_data]) for td in req.topic_data])]
    refused = denied(ctx, Operation.WRITE, ResourceType.TOPIC, (td.name for td in req.topic_data))
    view = broker.view
    replication = broker.replication
    replicated = acks == -1 and replication is not None  # acks=all waits for the ISR
    waits: dict = {}
    verified = await _verified(broker, txn_id, req, refused, ctx.api_version)
    for td in req.topic_data:
        name = td.name
        topic = None if name in refused else logs.get(name)
        parts = []
        for pd in td.partition_data:
            idx = pd.index
            if acks not in (0, 1, -1):
                parts.append(_partition_result(idx, ErrorCode.invalid_required_acks))
                continue
            p = None if topic is None or not 0 <= idx < len(topic.partitions) \
                else topic.partitions[idx]
            # Produce carries no leader epoch: only leadership is checked (once per partition)
            code = ErrorCode.topic_authorization_failed if name in refused else \
                view.leader_error(name, idx, NO_EPOCH)
            if p is None or code:
                parts.append(_partition_result(idx, code or ErrorCode.unknown_topic_or_partition))
                continue
            if replicated:  # min.insync.replicas, before anything is appended
                code = replication.produce_error(name, idx)
                if code:
                    parts.append(_partition_result(idx, code))
                    continue
            try:
                parts.append(append_batch(broker, name, p, idx, pd.records or b"", now,
                                          ctx.api_version, req.transactional_id, verified))
                touched.append(p)
                if replicated and not parts[-1][1]:
                    waits[(name, idx)] = replication.wait_acks(name, idx, p.log_end_offset)
            except KafkaError as e:
                parts.append(_error_result(idx, e))
            except LogError as e:
                parts.append(_partition_result(idx, log_error_code(e, f"{name}-{idx}"),
                                               message=str(e)))
        failed = failed or any(r[1] for r in parts)
        results.append((name, parts))
    ctx.throttle_ms = broker.quotas.record(PRODUCE, ctx.client_id, sum(  # client quotas
        len(pd.records or b"") for td in req.topic_data for pd in td.partition_data))
    if acks == 0:
        if failed:
            raise MalformedRequest("acks=0 produce had errors: closing the connection so "
                                   "the client refreshes metadata, as Kafka does")
        return None
    try:
        for p in touched:  # flush.messages reached: as in Kafka, answered once flushed
            fut = p.take_ack_flush()
            if fut is not None:
                await wait_durable(fut, f"flush of {p.topic}-{p.partition}")
        if acks == -1 and touched and broker.config["kafkalite.fsync.before.ack"]:
            await broker.sync(touched)
    except OSError as e:
        results = [(name, [r if r[1] else _partition_result(
            r[0], ErrorCode.kafka_storage_error, message=f"fsync failed: {e}")
            for r in parts]) for name, parts in results]
    if waits:
        results = await _replicated(waits, results, to_ms(req.timeout))
    return [encode_response(ctx.api_version, results, ctx.throttle_ms)]


async def _replicated(waits: dict, results: list, timeout_ms: int) -> list:
    """acks=all in a cluster (Kafka's DelayedProduce): each appended partition answers once
    the HW passes its batch, REQUEST_TIMED_OUT after the request's timeout, or the error its
    wait ended with (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER)."""
    futs = [f for f in waits.values() if f is not None]
    if futs:
        await asyncio.wait(futs, timeout=max(timeout_ms, 0) / 1000)
    out = []
    for name, parts in results:
        fixed = []
        for r in parts:
            fut = waits.get((name, r[0]))
            code = ErrorCode.none if fut is None or r[1] else \
                fut.result() if fut.done() else ErrorCode.request_timed_out
            fixed.append(r if code == ErrorCode.none else _partition_result(r[0], code))
            if fut is not None and not fut.done():
                fut.cancel()
        out.append((name, fixed))
    return out
