# Storage failures through the wire: a Produce whose append or segment roll fails, and a
# DeleteRecords whose checkpoint cannot be written, are answered KAFKA_STORAGE_ERROR for that
# partition (as Kafka answers for a partition on a failed log dir), and the broker keeps
# serving that connection, the other partitions and new connections; once the disk is
# back, the partition takes appends again at the offset where it stopped.
#
# The failures are real, provoked on the running broker's files: the partition directory
# replaced by a plain file (creating the next segment fails with ENOTDIR), and a file-size
# limit set on the broker process (RLIMIT_FSIZE: the append's write fails with EFBIG).
from __future__ import annotations

import os
import resource

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import (batch_headers, call, connect, fetch_raw, produce_raw,
                                  simple_batch)

KAFKA_STORAGE_ERROR = 56
SEGMENT_BYTES = 2048


@pytest.fixture
def broker(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"),
                       settings={"log.segment.bytes": str(SEGMENT_BYTES)})
    bp.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
        try:
            admin.create_topics([NewTopic("st", 2, 1)])
        finally:
            admin.close()
        yield bp
    finally:
        bp.cleanup()


def _batch(tag: bytes) -> bytes:
    return simple_batch(1, size=SEGMENT_BYTES * 2 // 3, tag=tag)  # two never share a segment


def _delete_records(sock, topic: str, partition: int, offset: int):
    Req = DeleteRecordsRequest[2]
    T = Req.DeleteRecordsTopic
    r = call(sock, Req(topics=[T(name=topic, partitions=[T.DeleteRecordsPartition(
        partition_index=partition, offset=offset)])], timeout_ms=5000))
    return r.topics[0].partitions[0]


def _earliest(sock, topic: str, partition: int) -> int:
    Req = ListOffsetsRequest[7]
    T = Req.ListOffsetsTopic
    r = call(sock, Req(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=partition, timestamp=-2,
                               current_leader_epoch=-1)])]))
    return r.topics[0].partitions[0].offset


def _still_serving(bp: BrokerProcess, sock) -> None:
    """The other partition takes and serves records; a new connection is answered."""
    before = fetch_raw(sock, "st", 1, 0).high_watermark
    r = produce_raw(sock, "st", 1, _batch(b"other"))
    assert (r.error_code, r.base_offset) == (0, before)
    assert fetch_raw(sock, "st", 1, before).error_code == 0
    with connect(bp.bootstrap) as fresh:
        md = call(fresh, MetadataRequest[4](topics=None, allow_auto_topic_creation=False))
        assert [t.name for t in md.topics] == ["st"]


def _append_failure(broker) -> None:
    with connect(broker.bootstrap) as s:
        r = produce_raw(s, "st", 1, simple_batch(1, size=100))
        assert r.error_code == 0
        seg = os.path.join(broker.data_dir, "st-1", f"{r.base_offset:020d}.log")
        limit = os.path.getsize(seg) + 50
        pid = broker.proc.pid
        old = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, old[1]))
        try:
            end = r.base_offset + 1
            r = produce_raw(s, "st", 1, simple_batch(1, size=200))  # crosses the limit
            assert r.error_code == KAFKA_STORAGE_ERROR
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, old)
        assert os.path.getsize(seg) < limit  # the partial write was cut back
        r = produce_raw(s, "st", 1, simple_batch(1, size=200))
        assert (r.error_code, r.base_offset) == (0, end)


def test_produce_and_delete_records_storage_failures_answer_storage_error(broker):
    _append_failure(broker)  # on st-1
    _roll_and_checkpoint_failures(broker)  # on st-0, st-1 still serving


def _roll_and_checkpoint_failures(broker) -> None:
    pdir = os.path.join(broker.data_dir, "st-0")
    with connect(broker.bootstrap) as s:
        assert produce_raw(s, "st", 0, _batch(b"first")).base_offset == 0
        os.rename(pdir, pdir + ".away")
        with open(pdir, "wb"):
            pass  # the partition directory is now a file: the next segment cannot be made
        try:
            r = produce_raw(s, "st", 0, _batch(b"lost"))  # needs a roll
            assert r.error_code == KAFKA_STORAGE_ERROR and r.base_offset == -1
            d = _delete_records(s, "st", 0, 1)  # its checkpoint cannot be written
            assert (d.error_code, d.low_watermark) == (KAFKA_STORAGE_ERROR, -1)
            _still_serving(broker, s)
        finally:
            os.unlink(pdir)
            os.rename(pdir + ".away", pdir)
        assert _earliest(s, "st", 0) == 0  # the failed DeleteRecords moved nothing
        r = produce_raw(s, "st", 0, _batch(b"second"))
        assert (r.error_code, r.base_offset) == (0, 1)  # the failed append took no offset
        data = fetch_raw(s, "st", 0, 0).records
        assert [h.base_offset for h in batch_headers(data)] == [0]
        assert [h.base_offset for h in batch_headers(fetch_raw(s, "st", 0, 1).records)] \
            == [1]
        assert _delete_records(s, "st", 0, 1).error_code == 0
    broker.restart()
    with connect(broker.bootstrap) as s:
        assert _earliest(s, "st", 0) == 1  # the checkpoint that succeeded is on disk
