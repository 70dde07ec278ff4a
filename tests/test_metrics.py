# The Prometheus endpoint, scraped during a produce/consume run: counters move by exactly
# what the clients did.
from __future__ import annotations

import re
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import BrokerProcess, free_port


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def metric(samples: dict[str, float], name: str, **labels: str) -> float:
    for key, value in samples.items():
        if not key.startswith(name + "{") and key != name:
            continue
        if all(re.search(rf'{k}="{re.escape(v)}"', key) for k, v in labels.items()):
            return value
    return 0.0


def test_metrics_follow_a_produce_consume_run(tmp_path):
    mport = free_port()
    with BrokerProcess(data_dir=str(tmp_path / "d"),
                       settings={"kafkalite.metrics.port": str(mport)}) as bp:
        before = scrape(mport)
        assert metric(before, "kafkalite_under_replicated_partitions") == 0
        producer = Producer({"bootstrap.servers": bp.bootstrap, "linger.ms": 5})
        for i in range(500):
            producer.produce("metered", key=b"k", value=b"x" * 100, partition=0)
        assert producer.flush(30) == 0
        mid = scrape(mport)
        assert metric(mid, "kafkalite_topic_messages_in_total", topic="metered") == 500
        assert metric(mid, "kafkalite_log_end_offset", topic="metered", partition="0") == 500
        bytes_in = metric(mid, "kafkalite_topic_bytes_in_total", topic="metered")
        assert bytes_in > 500 * 100
        assert metric(mid, "kafkalite_requests_total", api="Produce") >= 1
        assert metric(mid, "kafkalite_connections_active") >= 1

        consumer = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "metered-g",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("metered", 0, 0)])
        got = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got += 1
            if got == 500:
                break
        assert got == 500
        consumer.commit(offsets=[TopicPartition("metered", 0, 400)], asynchronous=False)
        after = scrape(mport)
        consumer.close()
        # every fetched byte is a stored byte (the log holds the batches as produced)
        assert metric(after, "kafkalite_topic_bytes_out_total", topic="metered") >= bytes_in
        assert metric(after, "kafkalite_consumer_group_lag", group="metered-g",
                      topic="metered", partition="0") == 100
        assert metric(after, "kafkalite_request_latency_seconds_count", api="Fetch") >= 1
        assert metric(after, "kafkalite_requests_total", api="Fetch") > \
            metric(mid, "kafkalite_requests_total", api="Fetch")


def test_cleaner_metrics_after_a_cleaning(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic
    mport = free_port()
    # a dedupe map of 900 keys, so that the 300 keys fill a visible share of it
    settings = {"kafkalite.metrics.port": str(mport), "log.cleaner.backoff.ms": "100",
                "log.cleaner.dedupe.buffer.size": "24000"}
    with BrokerProcess(data_dir=str(tmp_path / "d"), settings=settings) as bp:
        admin = AdminClient({"bootstrap.servers": bp.bootstrap})
        admin.create_topics([NewTopic("cleaned", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01"})])["cleaned"].result(20)
        before = scrape(mport)
        assert metric(before, "kafkalite_log_cleaner_bytes_read_total") == 0
        # batches smaller than the map: a batch must fit in it whole
        producer = Producer({"bootstrap.servers": bp.bootstrap, "linger.ms": 5,
                             "batch.num.messages": 50})
        for i in range(3000):  # 10 updates of each of 300 keys
            producer.produce("cleaned", key=b"k%d" % (i % 300), value=b"v" * 100, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            after = scrape(mport)
            if metric(after, "kafkalite_log_cleaner_cleanings_total") >= 1:
                break
            time.sleep(0.2)
        read = metric(after, "kafkalite_log_cleaner_bytes_read_total")
        written = metric(after, "kafkalite_log_cleaner_bytes_written_total")
        assert metric(after, "kafkalite_log_cleaner_cleanings_total") >= 1
        # superseded values were dropped: less written than read, and the log shrank
        assert 0 < written < read
        assert 0 < metric(after, "kafka_log_LogCleaner_cleaner_recopy_percent") < 100
        assert 0 < metric(after, "kafka_log_LogCleaner_max_buffer_utilization_percent") <= 100
        assert metric(after, "kafkalite_log_size_bytes", topic="cleaned", partition="0") < \
            metric(after, "kafkalite_topic_bytes_in_total", topic="cleaned")
        assert 0 <= metric(after, "kafka_log_LogCleanerManager_max_dirty_percent") <= 100
        assert "kafka_log_LogCleanerManager_time_since_last_run_ms" in after
        assert "kafka_log_LogCleaner_max_clean_time_secs" in after
        assert metric(after, "kafka_log_LogCleaner_DeadThreadCount") == 0
        assert metric(after, "kafka_log_LogCleanerManager_uncleanable_partitions_count",
                      logDirectory=bp.data_dir) == 0
