# Record-level checks on produced batches, the part of Kafka's LogValidator that has to look
# inside a batch. Off the hot path by default: kafkalite validates batches by their header
# and CRC32C only (no per-record work). Records are walked only
#  - on compacted topics, to refuse keyless records (LogValidator.validateKey), and
#  - everywhere when `kafkalite.produce.validate.records=true`: the batch must decompress,
#    every record's framing must parse and end exactly at the next one, offset deltas must
#    run 0..n-1, and each record's timestamp must respect message.timestamp.before/after.max.ms
#    (CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, as Kafka answers).
from __future__ import annotations

from ..wire.errors import ErrorCode, KafkaError
from ..wire.record_iter import iter_records
from ..wire.records import BatchHeader


def check_records(batch: bytes, h: BatchHeader, cfg, now_ms: int, require_keys: bool,
                  full: bool) -> None:
    """Raise KafkaError when the records of `batch` are not what Kafka would accept."""
    expected = 0
    try:
        for r in iter_records(batch):
            if require_keys and r.key is None:
                raise KafkaError(ErrorCode.invalid_record,
                                 "Compacted topic cannot accept message without key")
            if not full:
                continue
            if r.offset - h.base_offset != expected:
                raise KafkaError(ErrorCode.invalid_record,
                                 f"record {expected} has offset delta "
                                 f"{r.offset - h.base_offset}")
            expected += 1
            if not cfg.log_append_time and (
                    now_ms - r.timestamp > cfg.timestamp_before_max_ms
                    or r.timestamp - now_ms > cfg.timestamp_after_max_ms):
                raise KafkaError(ErrorCode.invalid_timestamp,
                                 f"Timestamp {r.timestamp} of record {expected - 1} is out "
                                 "of range (message.timestamp.before/after.max.ms)")
    except KafkaError:
        raise
    except Exception as e:  # a body that does not decompress or parse, though its CRC matched
        raise KafkaError(ErrorCode.corrupt_message, f"cannot decode records: {e}") from None
