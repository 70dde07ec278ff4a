# Checks on a produced batch's records: the part of Kafka's LogValidator that looks inside a
# batch, answered as Kafka answers it, with record-level errors (KIP-467): every offending
# record's batch index and message, so that a client fails exactly those records and knows
# that the others were refused because of them.
#
# Off the hot path: a batch is checked by its header (base/max timestamps against
# message.timestamp.before/after.max.ms) and its records are walked only
#  - on compacted topics, to refuse keyless records (LogValidator.validateKey), checking each
#    record's timestamp on the way;
#  - when the header's timestamps are out of range, to name the records that are (a batch
#    whose records are all in range after all is accepted, as Kafka accepts it);
#  - everywhere when `kafkalite.produce.validate.records=true`: the batch must also
#    decompress, every record's framing parse, and offset deltas run 0..n-1.
# A body that does not decompress or parse is CORRUPT_MESSAGE; a batch with keyless records
# INVALID_RECORD; one with a record out of the timestamp bounds INVALID_TIMESTAMP (Kafka's
# LogValidator.processRecordErrors).
from __future__ import annotations

from typing import Iterator

from ..wire.errors import ErrorCode, KafkaError
from ..wire.record_iter import iter_records, scan_records
from ..wire.records import BatchHeader

NO_TIMESTAMP = -1
SHOWN_ERRORS = 3


class RecordErrors(KafkaError):
    """A batch refused because of some of its records: (batch index, message) of each."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(code, message)
        self.record_errors = record_errors


def _java_long(v: int) -> int:
    """Kafka prints its bounds with Java's wrapping long arithmetic."""
    return (v + 2**63) % 2**64 - 2**63


def _walk(batch: bytes, h: BatchHeader, full: bool) -> Iterator[tuple[int, int, bool]]:
    if not full:
        return scan_records(batch)
    return ((r.offset - h.base_offset, r.timestamp, r.key is not None)
            for r in iter_records(batch))


def check_records(batch: bytes, h: BatchHeader, cfg, now_ms: int, topic: str, partition: int,
                  full: bool) -> None:
    """Raise KafkaError (RecordErrors for record-level errors) when Kafka would refuse
    `batch` for its records; `cfg` is the partition's LogConfig."""
    check_ts = not cfg.log_append_time
    before, after = cfg.timestamp_before_max_ms, cfg.timestamp_after_max_ms
    if check_ts and h.base_timestamp > h.max_timestamp:
        # A batch whose first record is later than its maximum is inconsistent and would
        # hide later records from the header check.
        raise KafkaError(ErrorCode.invalid_timestamp,
                         f"baseTimestamp {h.base_timestamp} is after maxTimestamp "
                         f"{h.max_timestamp}")
    compacted = "compact" in cfg.cleanup_policy
    header_ok = not check_ts or (now_ms - h.base_timestamp <= before
                                 and h.max_timestamp - now_ms <= after)
    if header_ok and not compacted and not full:
        return
    keyless = f"Compacted topic cannot accept message without key in topic partition " \
              f"{topic}-{partition}"
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    try:
        for i, (delta, ts, has_key) in enumerate(_walk(batch, h, full)):
            if full and delta != i:
                raise KafkaError(ErrorCode.invalid_record,
                                 f"record {i} has offset delta {delta}")
            if compacted and not has_key:
                errors.append((i, keyless))
            elif check_ts and ts != NO_TIMESTAMP and (now_ms - ts > before
                                                      or ts - now_ms > after):
                bad_timestamp = True
                errors.append((i, f"Timestamp {ts} of message with offset "
                                  f"{h.base_offset + delta} is out of range. The timestamp "
                                  f"should be within [{_java_long(now_ms - before)}, "
                                  f"{_java_long(now_ms + after)}]"))
    except KafkaError:
        raise
    except Exception as e:  # a body that does not decompress or parse, though its CRC matched
        raise KafkaError(ErrorCode.corrupt_message, f"cannot decode records: {e}") from None
    if bad_timestamp:
        raise RecordErrors(ErrorCode.invalid_timestamp,
                           "One or more records have been rejected due to invalid timestamp",
                           errors)
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')"
                          for i, m in errors[:SHOWN_ERRORS])
        raise RecordErrors(ErrorCode.invalid_record,
                           f"One or more records have been rejected due to {len(errors)} "
                           "record errors in total, and only showing the first three errors "
                           f"at most: [{shown}]", errors)
