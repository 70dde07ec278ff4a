# Produce (key 0), v0-11 advertised, v3-11 served.
#
# v0-2 stay advertised because librdkafka disables compression unless Produce v0 is listed
# (KAFKA-18659); like Kafka 4, they are answered with UNSUPPORTED_VERSION. Each partition
# carries exactly one v2 batch, validated by its header and CRC32C and appended as bytes
# (offsets assigned by rewriting its first 16 bytes; never recompressed).
# LogAppendTime topics get the batch's maxTimestamp rewritten and a new CRC. Idempotent
# batches (producerId >= 0) are sequence-checked: duplicates answer their original offset.
# acks=0 sends no response; if any partition failed, the connection is closed so the client
# refreshes metadata (as Kafka). acks=-1 with kafkalite.fsync.before.ack fsyncs first, and
# an append that reaches flush.messages is answered once that flush is done (as in Kafka).
# A storage failure answers KAFKA_STORAGE_ERROR for its partition only.
# zstd batches below v7 get UNSUPPORTED_COMPRESSION_TYPE, as in Kafka's
# ProduceRequest.validateRecords. Produce never auto-creates topics (Metadata does).
# Gaps: transactions; topic compression.type other than `producer` is not applied
# (batches are stored as sent); timestamp bounds are checked on the batch's base and max
# timestamps, not per record. Records are decoded only on compacted topics (keyless ones
# are INVALID_RECORD) or with kafkalite.produce.validate.records (see record_checks.py).
from __future__ import annotations

import struct
import time

from ...log.flusher import wait_durable
from ...wire.errors import ErrorCode, KafkaError, MalformedRequest
from ...wire.primitives import EMPTY_TAGS, array_len, string
from ...wire.records import validate_produce_batch
from ..record_checks import check_records
from ..registry import api
from ._storage import LogError, log_error_code

_P3 = struct.Struct(">ihqq")     # index, error, base offset, log append time
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
ZSTD = 4


def _partition_result(idx: int, code: int, base: int = -1, append_time: int = -1,
                      start: int = -1, message: str | None = None) -> tuple:
    return idx, code, base, append_time, start, message


def encode_response(version: int, results: list[tuple[str, list[tuple]]]) -> bytes:
    flex = version >= 9
    out = [array_len(len(results), flex)]
    for name, parts in results:
        out.append(string(name, flex))
        out.append(array_len(len(parts), flex))
        for idx, code, base, append_time, start, message in parts:
            out.append(_P3.pack(idx, code, base, append_time))
            if version >= 5:
                out.append(_I64.pack(start))
            if version >= 8:
                out.append(array_len(0, flex))
                out.append(string(message, flex))
            if flex:
                out.append(EMPTY_TAGS)
        if flex:
            out.append(EMPTY_TAGS)
    out.append(_I32.pack(0))
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


def _check_timestamps(cfg, h, now: int) -> None:
    if cfg.log_append_time:
        return
    if h.base_timestamp > h.max_timestamp:
        # Only the batch's bounds are checked (no per-record work); a batch whose first
        # record is later than its maximum is inconsistent and would hide later records.
        raise KafkaError(ErrorCode.invalid_timestamp,
                         f"baseTimestamp {h.base_timestamp} is after maxTimestamp "
                         f"{h.max_timestamp}")
    if now - h.base_timestamp > cfg.timestamp_before_max_ms \
            or h.max_timestamp - now > cfg.timestamp_after_max_ms:
        raise KafkaError(ErrorCode.invalid_timestamp,
                         f"Timestamp {h.max_timestamp} of batch is out of range "
                         f"(message.timestamp.before/after.max.ms)")


def append_batch(broker, topic: str, p, idx: int, records: bytes, now: int,
                 version: int = 11) -> tuple:
    """Validate and append one partition's batch; returns its partition result."""
    h = validate_produce_batch(records, p.config.max_message_bytes)
    if h.compression == ZSTD and version < 7:
        # ProduceRequest.validateRecords: zstd needs Produce v7+ (KIP-110).
        raise KafkaError(ErrorCode.unsupported_compression_type,
                         "zstd-compressed batches need Produce v7 or later")
    _check_timestamps(p.config, h, now)
    compacted = "compact" in p.config.cleanup_policy
    full = broker.config["kafkalite.produce.validate.records"]
    if compacted or full:
        check_records(records, h, p.config, now, compacted, full)
    state = broker.producer_state(p) if h.producer_id >= 0 else None
    if state is not None:
        dup = state.check(h.producer_id, h.producer_epoch, h.base_sequence,
                          h.last_offset_delta)
        if dup is not None:
            return _partition_result(idx, 0, dup, -1, p.log_start_offset)
    base = p.append(records, h, now)
    if state is not None:
        state.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                     base)
    broker.notifier.notify(topic, idx)
    broker.stats.produced(topic, len(records), h.records_count)
    return _partition_result(idx, 0, base, now if p.config.log_append_time else -1,
                             p.log_start_offset)


@api(0, "Produce", (0, 11), decodable_from=3, legacy=legacy_response)
async def handle(ctx, req):
    broker = ctx.broker
    logs = broker.logs
    now = int(time.time() * 1000)
    acks = req.acks
    results: list[tuple[str, list[tuple]]] = []
    touched = []
    failed = False
    for td in req.topic_data:
        name = td.name
        topic = logs.get(name)
        parts = []
        for pd in td.partition_data:
            idx = pd.index
            if acks not in (0, 1, -1):
                parts.append(_partition_result(idx, ErrorCode.invalid_required_acks))
                continue
            p = None if topic is None or not 0 <= idx < len(topic.partitions) \
                else topic.partitions[idx]
            if p is None:
                parts.append(_partition_result(idx, ErrorCode.unknown_topic_or_partition))
                continue
            try:
                parts.append(append_batch(broker, name, p, idx, pd.records or b"", now,
                                          ctx.api_version))
                touched.append(p)
            except KafkaError as e:
                parts.append(_partition_result(idx, e.code, message=e.message))
            except LogError as e:
                parts.append(_partition_result(idx, log_error_code(e, f"{name}-{idx}"),
                                               message=str(e)))
        failed = failed or any(r[1] for r in parts)
        results.append((name, parts))
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
    return [encode_response(ctx.api_version, results)]
