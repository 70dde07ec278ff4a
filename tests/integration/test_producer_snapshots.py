# Idempotent-producer state over real sockets and real disks: a broker with small segments
# writes a Kafka-format `.snapshot` at each roll while confluent-kafka produces idempotently;
# killed (-9) and restarted, it replays only the batches after the newest snapshot and still
# answers a retry of the producer's last batch with its original offset. Kafka's own
# `kafka-dump-log.sh` reads kafkalite's snapshot files. A producer idle for longer than
# producer.id.expiration.ms disappears from DescribeProducers and may start again at any
# sequence, as in Apache Kafka 3.8.
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer import InitProducerIdRequest
from kafka.structs import TopicPartition

from kafkalite.broker.broker import Broker
from kafkalite.config import BrokerConfig
from kafkalite.coordinator import producer_snapshot as snap
from kafkalite.testing import BrokerProcess
from kafkalite.wire.records import parse_header

from tests.helpers.kbatch import (batch_headers, call, connect, fetch_raw, produce_raw,
                                  simple_batch)
from tests.helpers.kclients import produce

KAFKA_HOME = "/work/shared/anchors/kafka-3.8.0"
DUMP_LOG = os.path.join(KAFKA_HOME, "bin", "kafka-dump-log.sh")


def _wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _create(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def _log_batches(bootstrap: str, topic: str) -> list[bytes]:
    """Every batch of partition 0 as stored, read back through Fetch."""
    out: list[bytes] = []
    with connect(bootstrap) as s:
        offset, end = 0, fetch_raw(s, topic, 0, 0, max_bytes=1).high_watermark
        while offset < end:
            data = bytes(fetch_raw(s, topic, 0, offset).records)
            pos = 0
            for h in batch_headers(data):
                out.append(data[pos:pos + h.size])
                pos += h.size
                offset = h.base_offset + h.last_offset_delta + 1
    return out


def _segment_bases(directory: str) -> list[int]:
    return sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log"))


def test_a_killed_broker_recognises_the_last_batch_from_its_roll_snapshot(tmp_path):
    settings = {"log.segment.bytes": "20000"}
    with BrokerProcess(data_dir=str(tmp_path / "data"), settings=settings) as bp:
        _create(bp.bootstrap, "rolled")
        pdir = os.path.join(bp.data_dir, "rolled-0")
        records = [(0, None, b"%05d" % i * 20, [], None) for i in range(3000)]
        produce("confluent", bp.bootstrap, "rolled", records, idempotent=True,
                **{"batch.size": 4000})
        bases = _segment_bases(pdir)
        assert len(bases) > 5
        _wait_for(lambda: snap.list_offsets(pdir) == bases[1:], 10, "a snapshot per roll")

        # Plain batches until the log rolls once more: the idempotent producer's last batch
        # is then before the newest snapshot, so after a crash only that snapshot knows it.
        last = _log_batches(bp.bootstrap, "rolled")[-1]
        h = parse_header(last)
        assert h.producer_id >= 0
        with connect(bp.bootstrap) as s:
            for _ in range(100):
                produce_raw(s, "rolled", 0, simple_batch(20, size=100))
                if len(_segment_bases(pdir)) > len(bases):
                    break
        newest = _segment_bases(pdir)[-1]
        assert newest > h.base_offset
        _wait_for(lambda: newest in snap.list_offsets(pdir), 10, "the last roll's snapshot")
        stored = _log_batches(bp.bootstrap, "rolled")

        bp.kill()
        bp.start()
        replayed = re.findall(r"Loaded producer state in \S+ \((\d+) batch headers replayed",
                              bp.read_log())
        tail = [b for b in stored if parse_header(b).base_offset >= newest]
        assert int(replayed[-1]) == len(tail) < len(stored) // 4
        retry = struct.pack(">q", 0) + last[8:12] + struct.pack(">i", -1) + last[16:]
        with connect(bp.bootstrap) as s:
            r = produce_raw(s, "rolled", 0, retry)
            assert (r.error_code, r.base_offset) == (0, h.base_offset)
            end = fetch_raw(s, "rolled", 0, 0, max_bytes=1).high_watermark
        assert end == parse_header(stored[-1]).base_offset + \
            parse_header(stored[-1]).last_offset_delta + 1  # nothing appended twice


@pytest.mark.skipif(not (os.path.exists(DUMP_LOG) and shutil.which("java")),
                    reason="needs Apache Kafka 3.8.0's tools and a JVM")
def test_kafka_dump_log_reads_kafkalite_snapshots(tmp_path):
    b = Broker(BrokerConfig({"log.dirs": str(tmp_path), "log.segment.bytes": "2000"}))
    b.open()
    b.create_topic("dump", 1)
    p = b.logs.partition("dump", 0)
    seqs = {21: 0, 22: 1000}
    while len(p.segments) < 3:
        for pid in seqs:
            _append(b, p, pid, seqs[pid])
            seqs[pid] += 5
    _append(b, p, 23, 2**31 - 3)  # a new producer whose first batch wraps past 2^31-1
    b.close()
    files = [os.path.join(p.directory, snap.file_name(o))
             for o in snap.list_offsets(p.directory)]
    assert len(files) >= 3  # two rolls and the clean shutdown
    out = subprocess.run([DUMP_LOG, "--files", ",".join(files)], capture_output=True,
                         text=True, timeout=120,
                         env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx64m"})
    assert out.returncode == 0, out.stderr
    dumped = re.findall(r"producerId: (\d+) producerEpoch: (\d+) .*? firstSequence: (\d+) "
                        r"lastSequence: (\d+) lastOffset: (\d+) offsetDelta: (\d+) "
                        r"timestamp: (\d+)", out.stdout)
    ours = [(pid, epoch, (seq - delta) % 2**31, seq, last, delta, ts)
            for f in files for pid, epoch, seq, last, delta, ts, *_txn
            in snap.decode(open(f, "rb").read())]
    assert [tuple(int(x) for x in d) for d in dumped] == ours
    assert {o[0] for o in ours} == {21, 22, 23} and len(ours) == 2 * len(files) + 1
    assert ours[-1][2:4] == (2**31 - 3, 1)  # first and last sequence of the wrapped batch


def _append(b: Broker, p, pid: int, seq: int) -> None:
    raw = simple_batch(5, producer_id=pid, producer_epoch=1, base_sequence=seq)
    h = parse_header(raw)
    b.producer_state(p).update(pid, 1, seq, 4, p.append(raw, h), h.max_timestamp)


def test_an_idle_producer_expires_and_may_start_again_at_any_sequence():
    settings = {"producer.id.expiration.ms": "1500",
                "producer.id.expiration.check.interval.ms": "100"}
    with BrokerProcess(settings=settings) as bp:
        _create(bp.bootstrap, "idle")
        admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
        tp = TopicPartition("idle", 0)
        try:
            with connect(bp.bootstrap) as s:
                r = call(s, InitProducerIdRequest[4](transactional_id=None,
                                                     transaction_timeout_ms=100,
                                                     producer_id=-1, producer_epoch=-1))
                pid, epoch = r.producer_id, r.producer_epoch

                def send(seq: int):
                    return produce_raw(s, "idle", 0, simple_batch(
                        1, producer_id=pid, producer_epoch=epoch, base_sequence=seq))
                assert send(0).error_code == 0
                assert send(5).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER while known
                [known] = admin.describe_producers([tp])[tp].active_producers
                assert (known.producer_id, known.last_sequence) == (pid, 0)
                _wait_for(lambda: not admin.describe_producers([tp])[tp].active_producers,
                          30, "the idle producer to expire")
                assert send(77).error_code == 0  # KIP-360: unknown again, any sequence
                assert send(79).error_code == 45
                [known] = admin.describe_producers([tp])[tp].active_producers
                assert known.last_sequence == 77
        finally:
            admin.close()
