# Asking Metadata for __consumer_offsets before any group exists creates it as Kafka does:
# internal, compacted, offsets.topic.num.partitions partitions (not num.partitions).
from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient

from kafkalite.testing import BrokerProcess


def test_metadata_creates_offsets_topic_with_internal_settings(tmp_path):
    settings = {"offsets.topic.num.partitions": "5", "num.partitions": "2"}
    with BrokerProcess(data_dir=str(tmp_path / "d"), settings=settings) as bp:
        producer = Producer({"bootstrap.servers": bp.bootstrap})  # its Metadata may create
        md = producer.list_topics("__consumer_offsets", timeout=10)
        assert len(md.topics["__consumer_offsets"].partitions) == 5
        admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
        try:
            described = admin.describe_topics(["__consumer_offsets"])[0]
        finally:
            admin.close()
        assert described["error_code"] == 0
        assert described["is_internal"] is True
        cadmin = AdminClient({"bootstrap.servers": bp.bootstrap})
        resource = ConfigResource("TOPIC", "__consumer_offsets")
        configs = cadmin.describe_configs([resource])[resource].result(timeout=10)
        assert configs["cleanup.policy"].value == "compact"
