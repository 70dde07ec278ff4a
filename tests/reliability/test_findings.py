# Minimal reproductions of defects the reliability harnesses found, one test each. Those
# still open are marked xfail(strict=True): each fails for the reason given and will XPASS
# (and so fail, prompting removal of the mark) once the defect is fixed. Those fixed since
# stay as regression tests. RELIABILITY.md describes them all.
from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import crc32c
import pytest

from benchmarks.reliability.common import (Broker, Conn, ConnectionClosed, build_batch,
                                           create_topic, fetch_range, list_offsets,
                                           produce_batch)
from benchmarks.reliability.disk import mount_tmpfs


@pytest.fixture
def broker(tmp_path):
    b = Broker(data_dir=str(tmp_path / "data"), settings={"log.retention.ms": "-1"})
    b.start_measured()
    yield b
    b.cleanup()


def _send_raw(b: Broker, body: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        try:
            return s.recv(100)
        except OSError:
            return b""


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _produce_doctored(broker: Broker, batch: bytearray) -> int:
    """Produce `batch` (CRC fixed up) to a new topic; returns the partition's error code."""
    with Conn(broker.bootstrap) as c:
        create_topic(c, "t", 1)
        return produce_batch(c, "t", 0, _with_crc(batch))[0]


def test_huge_compact_array_length_does_not_kill_the_broker(broker) -> None:
    """Fixed in 9004939 (wire/guard.py): kio 0.6.5's native reader reserved memory for a
    compact array's declared length before reading it; a 2^32 length made the allocation
    fail and Rust aborted the whole broker process."""
    # Metadata v12, null client id, no tags, topics: compact array of 2^32 - 2 entries.
    body = struct.pack(">hhih", 3, 12, 7, -1) + b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 3
    _send_raw(broker, body)
    time.sleep(0.5)
    assert broker.alive(), broker.read_log()[-500:]
    with Conn(broker.bootstrap) as c:
        assert c.call(18, 0).error_code == 0


@pytest.mark.xfail(strict=True, reason="Produce stores batches without decompressing them: "
                   "a batch flagged gzip whose payload is not gzip is acknowledged (Kafka's "
                   "LogValidator decompresses and answers CORRUPT_MESSAGE)")
def test_produce_rejects_undecompressable_batch(broker) -> None:
    b = bytearray(build_batch([(b"k", b"plain, not gzip")]))
    b[22] = (b[22] & 0xF8) | 1  # attributes: gzip
    assert _produce_doctored(broker, b) in (2, 87)  # CORRUPT_MESSAGE or INVALID_RECORD


@pytest.mark.xfail(strict=True, reason="Produce checks a batch's header and CRC but not its "
                   "records: garbage in place of the records (counts consistent, CRC "
                   "valid) is acknowledged, and every consumer then fails to decode it")
def test_produce_rejects_malformed_records(broker) -> None:
    b = bytearray(build_batch([(b"k1", b"v" * 30), (b"k2", b"w" * 30)]))
    b[61:] = bytes([0xFF]) * (len(b) - 61)  # record lengths become invalid varints
    assert _produce_doctored(broker, b) in (2, 87)


def test_list_offsets_by_time_answers_over_an_undecodable_batch(broker) -> None:
    """Fixed in 8a2379d: cramjam's DecompressionError escaped record_iter.decompress and the
    server dropped the connection; now the partition is answered CORRUPT_MESSAGE."""
    with Conn(broker.bootstrap) as c:
        create_topic(c, "t", 1)
        b = bytearray(build_batch([(b"k", b"x" * 40)]))
        b[22] = (b[22] & 0xF8) | 2  # snappy, payload is not snappy
        assert produce_batch(c, "t", 0, _with_crc(b))[0] == 0  # accepted (see above)
    with Conn(broker.bootstrap) as c:
        resp = c.call(2, 5, {
            "replica_id": -1, "isolation_level": 0, "timeout_ms": 5000,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": 1,
                 "max_num_offsets": 1}]}]})
        assert resp.topics[0].partitions[0].error_code == 2  # CORRUPT_MESSAGE
        assert c.call(18, 0).error_code == 0  # the connection is still in service


# Fixed by kafkalite/wire/guard.py, which refuses nulls the schema does not allow.
def test_null_non_nullable_array_is_a_protocol_error(broker) -> None:
    # OffsetCommit v2: group "g", generation -1, member "", retention -1, topics: null.
    body = struct.pack(">hhih", 8, 2, 7, -1) + struct.pack(">h", 1) + b"g" \
        + struct.pack(">ih", -1, 0) + struct.pack(">q", -1) + struct.pack(">i", -1)
    assert _send_raw(broker, body) == b""  # Kafka closes the connection too
    time.sleep(0.2)
    assert "Unexpected error" not in broker.read_log()


def test_bad_middle_index_entry_is_not_followed(tmp_path) -> None:
    """Fixed in 8a2379d: Segment.find trusted every .index entry (only the first and last
    were checked against their batches), so a middle entry pointing inside a batch made
    Fetch serve bytes that are not a batch."""
    b = Broker(data_dir=str(tmp_path / "data"),
               settings={"log.segment.bytes": "16384", "log.index.interval.bytes": "256"})
    b.start_measured()
    try:
        with Conn(b.bootstrap) as c:
            create_topic(c, "t", 1)
            for i in range(200):
                assert produce_batch(c, "t", 0, build_batch([(b"k%d" % i, b"v" * 80)]))[0] == 0
        b.stop()
        idx = tmp_path / "data" / "t-0" / "00000000000000000000.index"
        data = bytearray(idx.read_bytes())
        assert len(data) >= 24
        mid = (len(data) // 8 // 2) * 8
        rel, pos = struct.unpack_from(">II", data, mid)
        struct.pack_into(">II", data, mid, rel, pos - 1)  # still ascending, now mid-batch
        idx.write_bytes(bytes(data))
        b.start_measured()
        with Conn(b.bootstrap) as c:
            recs = fetch_range(c, "t", 0, rel, rel + 1, max_bytes=64)
        assert [r.offset for r in recs] == [rel]
    finally:
        b.cleanup()


def test_index_write_failure_does_not_lose_acknowledged_records() -> None:
    """Fixed in 8a2379d: Segment.append wrote the batch, then the index; when the index write
    failed (ENOSPC) the batch stayed in the file but next_offset did not advance, so the next
    batches reused its offset and recovery after a crash truncated acknowledged records."""
    root = tempfile.mkdtemp(prefix="kafkalite-enospc-")
    reason = mount_tmpfs(root, "2m")
    if reason:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(reason)
    logs = tempfile.mkdtemp()
    b = Broker(data_dir=os.path.join(root, "data"), log_path=os.path.join(logs, "b.log"),
               settings={"log.index.interval.bytes": "0"})  # an index entry per batch
    try:
        b.start_measured()
        seg = os.path.join(root, "data", "t-0", "00000000000000000000")
        with Conn(b.bootstrap) as c:
            create_topic(c, "t", 1)
            for i in range(508):
                assert produce_batch(c, "t", 0, build_batch([(b"k", b"a%d" % i)]))[0] == 0
            # One batch sized so that the log starts a fresh page: the next tiny batches
            # fit without new log pages while the index (8 bytes a batch) needs one at 512.
            size = os.path.getsize(seg + ".log")
            target = (size // 4096 + 2) * 4096 + 64
            pad = target - size - 72
            while len(build_batch([(b"k", b"p" * pad)])) + size > target:
                pad -= 1
            assert produce_batch(c, "t", 0, build_batch([(b"k", b"p" * pad)]))[0] == 0
            fd = os.open(os.path.join(root, "filler"), os.O_WRONLY | os.O_CREAT)
            for chunk in (4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * chunk)
                except OSError:
                    pass
            os.close(fd)
            for i in range(8):
                try:
                    if produce_batch(c, "t", 0, build_batch([(b"k", b"f%d" % i)]))[0]:
                        break
                except ConnectionClosed:
                    break
        os.unlink(os.path.join(root, "filler"))
        acked = {}
        with Conn(b.bootstrap) as c:
            for i in range(3):
                code, off = produce_batch(c, "t", 0, build_batch([(b"k", b"z%d" % i)]))
                assert code == 0
                acked[off] = b"z%d" % i
        b.kill()
        b.start_measured()
        with Conn(b.bootstrap) as c:
            end = list_offsets(c, "t", [0])[0]
            got = {r.offset: r.value for r in fetch_range(c, "t", 0, min(acked), end)}
        assert {o: got.get(o) for o in acked} == acked
    finally:
        b.kill()
        subprocess.run(["umount", root], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


# A batch whose first record (baseTimestamp) is later than its claimed maxTimestamp is
# refused with INVALID_TIMESTAMP. Records are still not walked one by one (no per-record
# work on produce), so a record whose delta alone goes beyond the bounds is a documented gap.
def test_produce_checks_record_timestamps_not_only_the_batch_fields(broker) -> None:
    ahead = int(time.time() * 1000) + 10 * 86_400_000
    b = bytearray(build_batch([(b"k", b"v")], ts=ahead))  # the record is 10 days ahead
    struct.pack_into(">q", b, 35, ahead - 20 * 86_400_000)  # maxTimestamp claims the past
    assert _produce_doctored(broker, b) == 32  # INVALID_TIMESTAMP
