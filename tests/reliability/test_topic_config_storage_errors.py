# A topic config change whose metadata write fails (the disk refuses it) is answered
# KAFKA_STORAGE_ERROR for that resource, by AlterConfigs and IncrementalAlterConfigs alike;
# the other resources of the request get their own answers, the change is not kept, and the
# broker keeps serving that connection and new ones. Once the disk is back, the same change
# is answered NONE and survives a restart.
#
# The failure is real, provoked on the running broker's files: the topic metadata directory
# (.kafkalite/topics) replaced by a plain file, so that writing the new metadata file fails
# with ENOTDIR.
from __future__ import annotations

import os

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import (AlterConfigsRequest, DescribeConfigsRequest,
                                  IncrementalAlterConfigsRequest)
from kafka.protocol.metadata import MetadataRequest

from tests.helpers.kbatch import call, connect

KAFKA_STORAGE_ERROR = 56
TOPIC, BROKER_LOGGER = 2, 8
SET = 0


def _retention(sock, topic: str) -> str:
    R = DescribeConfigsRequest.DescribeConfigsResource
    r = call(sock, DescribeConfigsRequest[2](resources=[R(
        resource_type=TOPIC, resource_name=topic, configuration_keys=["retention.ms"])],
        include_synonyms=False))
    (entry,) = r.results[0].configs
    return entry.value


def _alter(sock, topic: str, value: str):
    R = AlterConfigsRequest.AlterConfigsResource
    r = call(sock, AlterConfigsRequest[1](resources=[R(
        resource_type=TOPIC, resource_name=topic,
        configs=[R.AlterableConfig(name="retention.ms", value=value)])],
        validate_only=False))
    return [(x.resource_name, x.error_code) for x in r.responses]


def _alter_incremental(sock, topic: str, value: str):
    """A topic and a logger in one request: only the topic needs the disk."""
    Req = IncrementalAlterConfigsRequest[1]
    R = Req.AlterConfigsResource
    r = call(sock, Req(resources=[
        R(resource_type=TOPIC, resource_name=topic, configs=[
            R.AlterableConfig(name="retention.ms", config_operation=SET, value=value)]),
        R(resource_type=BROKER_LOGGER, resource_name="1", configs=[
            R.AlterableConfig(name="kafkalite.log", config_operation=SET, value="INFO")])],
        validate_only=False))
    return [(x.resource_name, x.error_code) for x in r.responses]


def _topics(bootstrap: str) -> list[str]:
    with connect(bootstrap) as fresh:
        md = call(fresh, MetadataRequest[4](topics=None, allow_auto_topic_creation=False))
        return sorted(t.name for t in md.topics)


def test_a_failed_topic_metadata_write_answers_storage_error(broker_process):
    bp = broker_process
    admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
    try:
        admin.create_topics([NewTopic("cfg", 1, 1, topic_configs={"retention.ms": "1000"})])
    finally:
        admin.close()
    meta_dir = os.path.join(bp.data_dir, ".kafkalite", "topics")
    aside = meta_dir + ".aside"
    with connect(bp.bootstrap) as s:
        os.rename(meta_dir, aside)
        with open(meta_dir, "wb"):
            pass  # a plain file where the directory was
        try:
            assert _alter(s, "cfg", "2000") == [("cfg", KAFKA_STORAGE_ERROR)]
            assert _alter_incremental(s, "cfg", "3000") == \
                [("cfg", KAFKA_STORAGE_ERROR), ("1", 0)]
            # Refused, so not applied: the override is still the one on disk.
            assert _retention(s, "cfg") == "1000"
            assert _topics(bp.bootstrap) == ["cfg"]
        finally:
            os.unlink(meta_dir)
            os.rename(aside, meta_dir)
        assert _alter(s, "cfg", "4000") == [("cfg", 0)]
        assert _alter_incremental(s, "cfg", "5000") == [("cfg", 0), ("1", 0)]
    bp.stop()
    bp.start()
    with connect(bp.bootstrap) as s:
        assert _retention(s, "cfg") == "5000"
