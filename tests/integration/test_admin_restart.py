"""Admin changes survive a broker restart; deleted topics leave no files; broker properties
set at startup show as STATIC_BROKER_CONFIG, in topic synonyms too."""
from __future__ import annotations

import os
import time

from kafka import KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, \
    NewPartitions

from kafkalite.testing import BrokerProcess

TOPIC = ConfigResourceType.TOPIC


def _admin(bp: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bp.bootstrap, client_id="restart-test")


def _configs(admin, name: str) -> dict:
    return admin.describe_configs([ConfigResource(TOPIC, name)], config_filter="all",
                                  include_synonyms=True)["topic"][name]


def test_admin_changes_survive_restart(broker_process):
    bp = broker_process
    admin = _admin(bp)
    try:
        admin.create_topics({"kept": {"num_partitions": 1, "configs": {"retention.ms": "5000000"}},
                             "doomed": {"num_partitions": 2}})
        admin.alter_configs([ConfigResource(TOPIC, "kept", {
            "max.message.bytes": (AlterConfigOp.SET, "500000"),
            "retention.ms": (AlterConfigOp.DELETE, None)})], incremental=True)
        admin.create_partitions({"kept": NewPartitions(3)})
        producer = KafkaProducer(bootstrap_servers=bp.bootstrap)
        for i in range(5):
            producer.send("kept", b"r%d" % i, partition=0)
            producer.send("doomed", b"r%d" % i, partition=1)
        producer.flush(timeout=20)
        producer.close(timeout=5)
        tp = TopicPartition("kept", 0)
        assert admin.delete_records({tp: 2})[tp]["low_watermark"] == 2
        assert os.path.isdir(os.path.join(bp.data_dir, "doomed-1"))
        res = admin.delete_topics(["doomed"])
        assert [t["error_code"] for t in res["topics"]] == [0]
    finally:
        admin.close()
    # As Kafka: the partition directories are renamed to `<dir>.<id>-delete` at once and
    # removed in the background, so only renamed leftovers may remain, and not for long.
    left = [n for n in os.listdir(bp.data_dir) if n.startswith("doomed")]
    assert all(n.endswith("-delete") for n in left), left
    deadline = time.monotonic() + 20
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [n for n in os.listdir(bp.data_dir) if n.startswith("doomed")]
    assert not left

    bp.restart()
    admin = _admin(bp)
    try:
        configs = _configs(admin, "kept")
        assert configs["max.message.bytes"]["value"] == "500000"
        assert configs["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert len(admin.describe_topics(["kept"])[0]["partitions"]) == 3
        assert "doomed" not in admin.list_topics()
        # Deleting below the current start answers the start checkpointed before the restart.
        assert admin.delete_records({tp: 0})[tp]["low_watermark"] == 2
    finally:
        admin.close()
    assert not any(n.startswith("doomed") for n in os.listdir(bp.data_dir))


def test_static_broker_configs_in_sources_and_synonyms(tmp_path):
    settings = {"log.segment.bytes": "2097152", "num.partitions": "2",
                "log.retention.hours": "24"}
    with BrokerProcess(data_dir=str(tmp_path / "data"), settings=settings) as bp:
        admin = _admin(bp)
        try:
            res = admin.create_topics({"t": {}}, raise_errors=False)["topics"][0]
            assert res["num_partitions"] == 2
            assert res["configs"]["segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
            assert res["configs"]["retention.ms"] == {
                "value": "86400000", "read_only": False, "is_sensitive": False,
                "config_source": "STATIC_BROKER_CONFIG"}
            seg = _configs(admin, "t")["segment.bytes"]
            assert seg["value"] == "2097152" and seg["config_source"] == "STATIC_BROKER_CONFIG"
            assert [(s["name"], s["value"], s["source"]) for s in seg["synonyms"]] == [
                ("log.segment.bytes", "2097152", "STATIC_BROKER_CONFIG"),
                ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]
            # Kafka drops synonyms listed before the primary one (log.retention.ms), so this
            # effective value comes with no synonyms and a DEFAULT_CONFIG source.
            retention = _configs(admin, "t")["retention.ms"]
            assert (retention["value"], retention["synonyms"]) == ("86400000", [])
            broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                            include_synonyms=True,
                                            config_filter="static")["broker"]["1"]
            assert broker["log.retention.hours"]["synonyms"] == [
                {"name": "log.retention.hours", "value": "24", "source": "STATIC_BROKER_CONFIG"},
                {"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"}]
        finally:
            admin.close()
