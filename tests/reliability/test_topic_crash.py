# A topic change that was answered NONE survives a SIGKILL sent right after the answer:
# CreateTopics, CreatePartitions, AlterConfigs on a topic and DeleteTopics all answer only
# once their metadata file work (done off the event loop) is complete. Raw requests over a
# real socket to a spawned broker; each restart after the kill is an unclean one.
from __future__ import annotations

import uuid

from kafka.protocol.admin import (AlterConfigsRequest, CreatePartitionsRequest,
                                  CreateTopicsRequest, DeleteTopicsRequest,
                                  DescribeConfigsRequest)
from kafka.protocol.metadata import MetadataRequest

from tests.helpers.kbatch import call, connect

NAME = "crash-topic"


def _describe(bp) -> tuple[int, uuid.UUID | None, int, str | None]:
    """(error, topic id, partition count, retention.ms override) of NAME."""
    with connect(bp.bootstrap) as s:
        req = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name=NAME)], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False)
        (t,) = call(s, req).topics
        if t.error_code:
            return t.error_code, None, 0, None
        R = DescribeConfigsRequest.DescribeConfigsResource
        cfg = call(s, DescribeConfigsRequest[2](resources=[R(
            resource_type=2, resource_name=NAME, configuration_keys=["retention.ms"])],
            include_synonyms=False), 2)
        (entry,) = cfg.results[0].configs
        override = entry.value if entry.config_source == 1 else None  # TOPIC_CONFIG
        return 0, uuid.UUID(str(t.topic_id)), len(t.partitions), override


def test_answered_topic_changes_survive_a_sigkill_right_after_the_answer(broker_process):
    bp = broker_process
    with connect(bp.bootstrap) as s:
        Topic = CreateTopicsRequest.CreatableTopic
        resp = call(s, CreateTopicsRequest[7](topics=[Topic(
            name=NAME, num_partitions=24, replication_factor=1, assignments=[],
            configs=[Topic.CreatableTopicConfig(name="retention.ms", value="777000")])],
            timeout_ms=5000, validate_only=False))
        bp.kill()  # at once: no clean shutdown, nothing more on the loop
    (created,) = resp.topics
    assert created.error_code == 0
    bp.start()
    assert _describe(bp) == (0, uuid.UUID(str(created.topic_id)), 24, "777000")

    with connect(bp.bootstrap) as s:
        T = CreatePartitionsRequest.CreatePartitionsTopic
        grown = call(s, CreatePartitionsRequest[1](topics=[T(name=NAME, count=40,
                                                            assignments=None)],
                                                  timeout_ms=5000, validate_only=False))
        R = AlterConfigsRequest.AlterConfigsResource
        altered = call(s, AlterConfigsRequest[1](resources=[R(
            resource_type=2, resource_name=NAME, configs=[
                R.AlterableConfig(name="retention.ms", value="888000")])],
            validate_only=False), 2)
        bp.kill()
    assert [r.error_code for r in grown.results] == [0]
    assert [r.error_code for r in altered.responses] == [0]
    bp.start()
    assert _describe(bp) == (0, uuid.UUID(str(created.topic_id)), 40, "888000")

    with connect(bp.bootstrap) as s:
        deleted = call(s, DeleteTopicsRequest[4](topic_names=[NAME], timeout_ms=5000))
        bp.kill()
    assert [(r.name, r.error_code) for r in deleted.responses] == [(NAME, 0)]
    bp.start()
    assert _describe(bp)[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
