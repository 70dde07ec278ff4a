# __consumer_offsets is compacted by the log cleaner like any compacted topic (small
# offsets.topic.segment.bytes so that its segments roll): superseded commits go, the
# committed offsets survive a clean and a hard restart, and an aborted transactional offset
# commit neither comes back nor takes the offset committed before it with it (the cleaner
# knows it was aborted from the .txnindex and never cleans past an open transaction).
# __transaction_state too: a transactional id's state survives its cleaning and a restart.
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTP

from kafkalite.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC, partition_for
from kafkalite.testing import BrokerProcess
from tests.integration.test_groups_durability import _create, _fetch

PARTITIONS = 50  # offsets.topic.num.partitions default
SETTINGS = {"offsets.topic.segment.bytes": "16384", "log.cleaner.backoff.ms": "200"}


@pytest.fixture
def broker(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=SETTINGS)
    bp.start()
    try:
        yield bp
    finally:
        bp.cleanup()


def offsets_records(bootstrap: str, partition: int, topic: str = OFFSETS_TOPIC) -> int:
    """How many records a read of an internal topic's partition from its start gives."""
    tp = KTP(topic, partition)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        n = 0
        deadline = time.monotonic() + 30
        while c.position(tp) < end and time.monotonic() < deadline:
            n += sum(len(v) for v in c.poll(500).values())
        return n
    finally:
        c.close()


def wait_cleaned_topic(bootstrap: str, topic: str, partition: int, below: int) -> int:
    deadline = time.monotonic() + 60
    n = offsets_records(bootstrap, partition, topic)
    while n >= below and time.monotonic() < deadline:
        time.sleep(0.5)
        n = offsets_records(bootstrap, partition, topic)
    return n


def wait_cleaned(bootstrap: str, partition: int, below: int) -> int:
    return wait_cleaned_topic(bootstrap, OFFSETS_TOPIC, partition, below)


def commit_many(bootstrap: str, group: str, topic: str, n: int) -> None:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        for i in range(1, n + 1):
            c.commit({KTP(topic, 0): OffsetAndMetadata(i, f"m{i}", -1)})
    finally:
        c.close()


def test_offsets_topic_cleaned_and_offsets_survive_restarts(broker):
    topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic, 2)
    commit_many(broker.bootstrap, group, topic, 1500)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                      enable_auto_commit=False)
    c.commit({KTP(topic, 1): OffsetAndMetadata(7, "seven", -1)})
    c.close()
    expected = {(topic, 0): (1500, "m1500"), (topic, 1): (7, "seven")}
    part = partition_for(group, PARTITIONS)
    assert wait_cleaned(broker.bootstrap, part, 500) < 500  # superseded commits are gone
    assert _fetch(broker.bootstrap, group) == expected
    broker.restart()
    assert _fetch(broker.bootstrap, group) == expected
    broker.restart(hard=True)
    assert _fetch(broker.bootstrap, group) == expected


def test_aborted_txn_offset_commit_cleaned_away_committed_offset_kept(broker):
    topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic, 2)
    commit_many(broker.bootstrap, group, topic, 10)  # (topic, 0) at 10
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": "tx-" + uuid.uuid4().hex[:6]})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"v", b"k", partition=1)
    p.send_offsets_to_transaction([CTP(topic, 0, 99)], consumer.consumer_group_metadata(),
                                  30)
    p.abort_transaction(30)
    consumer.close()
    # more commits of another partition: the aborted one ends up below the active segment
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                      enable_auto_commit=False)
    for i in range(1, 1501):
        c.commit({KTP(topic, 1): OffsetAndMetadata(i, "", -1)})
    c.close()
    expected = {(topic, 0): (10, "m10"), (topic, 1): (1500, "")}
    part = partition_for(group, PARTITIONS)
    assert wait_cleaned(broker.bootstrap, part, 500) < 500
    assert _fetch(broker.bootstrap, group) == expected
    broker.restart(hard=True)
    assert _fetch(broker.bootstrap, group) == expected


def test_transaction_state_cleaned_and_transactional_id_survives_restart(tmp_path):
    settings = {**SETTINGS, "transaction.state.log.segment.bytes": "4096"}
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=settings)
    bp.start()
    try:
        topic, txn_id = f"t-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
        _create(bp.bootstrap, topic, 1)
        p = Producer({"bootstrap.servers": bp.bootstrap, "transactional.id": txn_id})
        p.init_transactions(30)
        for i in range(150):  # each transaction writes its id's state 3 times
            p.begin_transaction()
            p.produce(topic, b"%d" % i, b"k", partition=0)
            p.commit_transaction(30)
        part = partition_for(txn_id, PARTITIONS)
        assert wait_cleaned_topic(bp.bootstrap, "__transaction_state", part, 100) < 100
        bp.restart(hard=True)
        # the id's state is loaded from the cleaned log: a new producer fences the old one
        # and its transactions commit
        q = Producer({"bootstrap.servers": bp.bootstrap, "transactional.id": txn_id})
        q.init_transactions(60)
        q.begin_transaction()
        q.produce(topic, b"after", b"k", partition=0)
        q.commit_transaction(30)
        c = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": uuid.uuid4().hex,
                      "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        c.assign([CTP(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 151 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                values.append(m.value())
        c.close()
        assert values == [b"%d" % i for i in range(150)] + [b"after"]
    finally:
        bp.cleanup()
