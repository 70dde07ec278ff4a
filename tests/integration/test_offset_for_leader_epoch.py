# OffsetForLeaderEpoch (key 23) over raw protocol against kafkalite and Kafka 3.8 with the
# same assertions, before and after DeleteRecords moves the log start: the partition's
# leader-epoch cache answers. And the `leader-epoch-checkpoint` file each broker keeps in the
# partition directory, in Kafka's text format, kept across a kafkalite restart.
from __future__ import annotations

import glob
import os
import uuid

import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from tests.helpers.kbatch import call, connect, produce_raw, simple_batch
from tests.helpers.real_kafka import _SHARED, create_topic, eventually

EPOCHS = (-3, -2, -1, 0, 1, 7)


def _answers(bootstrap: str, topic: str, version: int) -> list[tuple[int, int, int]]:
    """(error, leader epoch, end offset) per requested epoch, then for the current leader
    epochs 0 and 1 asking about epoch 0, then for an unknown partition."""
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Part = Topic.OffsetForLeaderPartition
    parts = [Part(partition=0, current_leader_epoch=-1, leader_epoch=e) for e in EPOCHS]
    parts += [Part(partition=0, current_leader_epoch=c, leader_epoch=0) for c in (0, 1)]
    parts.append(Part(partition=5, current_leader_epoch=-1, leader_epoch=0))
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(topic=topic,
                                                                   partitions=parts)])
    req.API_VERSION = version
    with connect(bootstrap) as s:
        resp = call(s, req)
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions]


def _delete_records(bootstrap: str, topic: str, offset: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert admin.delete_records({tp: offset})[tp]["low_watermark"] == offset
    finally:
        admin.close()


# Epochs -3 -2 -1 0 1 7 (current epoch -1), then epoch 0 at current epochs 0 and 1
# (1 is newer than the broker's: UNKNOWN_LEADER_EPOCH), then an unknown partition.
def _expected(log_start: int, log_end: int) -> list[tuple[int, int, int]]:
    return [(0, -3, log_start), (0, -2, log_start), (0, -1, -1), (0, 0, log_end),
            (0, -1, -1), (0, -1, -1), (0, 0, log_end), (75, -1, -1), (3, -1, -1)]


def test_offset_for_leader_epoch_follows_the_epoch_cache(any_broker):
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    create_topic(any_broker, topic)
    with connect(any_broker) as s:
        assert produce_raw(s, topic, 0, simple_batch(5)).error_code == 0
    for version in (2, 3, 4):
        assert _answers(any_broker, topic, version) == _expected(0, 5), version
    # The first epoch now starts at the new log start: an older epoch ends there.
    _delete_records(any_broker, topic, 3)
    assert _answers(any_broker, topic, 4) == _expected(3, 5)


def _checkpoint(data_dir: str, topic: str) -> bytes | None:
    found = glob.glob(os.path.join(data_dir, "**", f"{topic}-0", "leader-epoch-checkpoint"),
                      recursive=True)
    if not found:
        return None
    with open(found[0], "rb") as f:
        return f.read()


def _checkpoint_story(bootstrap: str, data_dir: str) -> str:
    topic = f"lec-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    # Written when the partition gets its leader, before any record.
    assert eventually(lambda: _checkpoint(data_dir, topic),
                      lambda b: b is not None) == b"0\n1\n0 0\n"
    with connect(bootstrap) as s:
        assert produce_raw(s, topic, 0, simple_batch(5)).error_code == 0
    _delete_records(bootstrap, topic, 3)
    assert eventually(lambda: _checkpoint(data_dir, topic),
                      lambda b: b != b"0\n1\n0 0\n") == b"0\n1\n0 3\n"
    return topic


def test_leader_epoch_checkpoint_kafkalite(broker_process):
    topic = _checkpoint_story(broker_process.bootstrap, broker_process.data_dir)
    for hard in (False, True):  # a clean stop, then SIGKILL: the cache comes back as it was
        broker_process.restart(hard=hard)
        assert _checkpoint(broker_process.data_dir, topic) == b"0\n1\n0 3\n"
        assert _answers(broker_process.bootstrap, topic, 4) == _expected(3, 5)


def test_leader_epoch_checkpoint_kafka(real_kafka):
    kafka = _SHARED["kafka"]
    if kafka is None or kafka.bootstrap != real_kafka:
        pytest.skip("REAL_KAFKA_BOOTSTRAP names a Kafka whose data directory is not here")
    _checkpoint_story(real_kafka, kafka.data_dir)
