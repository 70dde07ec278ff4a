"""record_checks.check_records (Kafka's LogValidator record checks, KIP-467 record errors),
the cheap record walk it uses, and the Produce encoder's record_errors, decoded by
kafka-python's independent codec."""
from __future__ import annotations

import time

import pytest
from kafka.protocol.producer import ProduceResponse

from kafkalite.broker.handlers.produce import encode_response
from kafkalite.broker.record_checks import RecordErrors, check_records
from kafkalite.log.partition import LogConfig
from kafkalite.wire.errors import ErrorCode
from kafkalite.wire.record_iter import iter_records, scan_records
from kafkalite.wire.records import parse_header
from tests.helpers.kbatch import CODECS, build_batch

LONG_MAX = 2**63 - 1
HOUR = 3_600_000


def _check(batch: bytes, cfg: LogConfig, now: int, full: bool = False) -> None:
    check_records(batch, parse_header(batch), cfg, now, "t", 0, full)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_scan_agrees_with_the_full_decoder(codec):
    now = int(time.time() * 1000)
    recs = [(None if i % 3 == 0 else b"k%d" % i, b"v" * (i * 7), [("h", b"x")] * (i % 2),
             now + i * 11) for i in range(40)]
    batch = build_batch(recs, CODECS[codec])
    h = parse_header(batch)
    full = [(r.offset - h.base_offset, r.timestamp, r.key is not None)
            for r in iter_records(batch)]
    assert list(scan_records(batch)) == full
    assert [k for _, _, k in full] == [i % 3 != 0 for i in range(40)]


def test_scan_refuses_records_that_do_not_add_up():
    batch = bytearray(build_batch([(b"k", b"value", [], 0), (b"k", b"value", [], 0)]))
    batch[61] = 0x7E  # the first record claims 63 bytes, past the end of the batch
    with pytest.raises(ValueError):
        list(scan_records(bytes(batch)))


def test_a_header_out_of_range_is_read_through_to_name_the_records():
    now = int(time.time() * 1000)
    cfg = LogConfig(timestamp_before_max_ms=HOUR, timestamp_after_max_ms=LONG_MAX)
    stamps = [now - 5 * HOUR, now, now - 2 * HOUR]
    with pytest.raises(RecordErrors) as e:
        _check(build_batch([(b"k", b"v", [], ts) for ts in stamps]), cfg, now)
    assert e.value.code == ErrorCode.invalid_timestamp
    assert [i for i, _ in e.value.record_errors] == [0, 2]
    # now + Long.MAX_VALUE wraps in Kafka's message, as Java's long arithmetic does.
    assert e.value.record_errors[0][1].endswith(
        f"within [{now - HOUR}, {now + LONG_MAX - 2**64}]")


def test_records_without_a_timestamp_or_on_log_append_time_topics_pass():
    now = int(time.time() * 1000)
    cfg = LogConfig(timestamp_before_max_ms=HOUR)
    _check(build_batch([(b"k", b"v", [], -1), (b"k", b"v", [], -1)]), cfg, now)
    old = build_batch([(b"k", b"v", [], now - 9 * HOUR)])
    _check(old, LogConfig(timestamp_before_max_ms=HOUR, log_append_time=True), now)


def test_keyless_and_late_records_together_are_an_invalid_timestamp():
    """LogValidator: one error per record, the key's first; any timestamp error makes the
    batch's error INVALID_TIMESTAMP, and every record error is listed."""
    now = int(time.time() * 1000)
    cfg = LogConfig(cleanup_policy="compact", timestamp_before_max_ms=HOUR)
    batch = build_batch([(None, b"v", [], now - 2 * HOUR), (b"k", b"v", [], now - 2 * HOUR),
                         (None, b"v", [], now)])
    with pytest.raises(RecordErrors) as e:
        _check(batch, cfg, now, full=True)
    assert e.value.code == ErrorCode.invalid_timestamp
    assert [(i, m.split(" ")[0]) for i, m in e.value.record_errors] == [
        (0, "Compacted"), (1, "Timestamp"), (2, "Compacted")]


@pytest.mark.parametrize("version", range(8, 12))
def test_record_errors_encode(version):
    errors = [(0, "no key"), (10, "ünïcode reason")]
    results = [("t", [(0, int(ErrorCode.invalid_record), -1, -1, -1, "refused", errors),
                      (1, 0, 5, -1, 0, None, ())])]
    r = ProduceResponse.decode(encode_response(version, results), version=version)
    parts = r.responses[0].partition_responses
    assert [(e.batch_index, e.batch_index_error_message) for e in parts[0].record_errors] \
        == errors
    assert parts[0].error_message == "refused"
    assert (parts[1].base_offset, parts[1].record_errors) == (5, [])
