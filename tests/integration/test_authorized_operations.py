"""authorized_operations as a broker without an authorizer answers them (issue 10, item 10):
every operation Kafka supports on the resource when the client asks, Int.MIN (decoded as
None by kafka-python) when it does not. Each test runs against kafkalite and the real Kafka
(`any_broker`), so the bit sets asserted are the ones Kafka 3.8 answers."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import DescribeClusterRequest, DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from tests.helpers.kbatch import call, connect
from tests.helpers.real_kafka import create_topic, eventually

# AclOperation codes (org.apache.kafka.common.acl.AclOperation).
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
TOPIC_OPS = {READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS}
CLUSTER_OPS = {CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
               IDEMPOTENT_WRITE}
GROUP_OPS = {READ, DELETE, DESCRIBE}


def _metadata(bootstrap: str, version: int, names: list[str], ask: bool):
    Req = MetadataRequest[version]
    fields = {"topics": [Req.MetadataRequestTopic(name=n) for n in names],
              "allow_auto_topic_creation": False, "include_topic_authorized_operations": ask}
    if version <= 10:  # v11 dropped the cluster's operations from Metadata
        fields["include_cluster_authorized_operations"] = ask
    with connect(bootstrap) as s:
        return call(s, Req(**fields))


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_operations(any_broker, version):
    topic = f"ops-{uuid.uuid4().hex[:10]}"
    create_topic(any_broker, topic)
    asked = _metadata(any_broker, version, [topic, "not a legal name!"], ask=True)
    ops = {t.name: (t.error_code, t.authorized_operations) for t in asked.topics}
    # Every entry carries them, the one refused for its name too.
    assert ops == {topic: (0, TOPIC_OPS), "not a legal name!": (17, TOPIC_OPS)}
    if version <= 10:
        assert asked.authorized_operations == CLUSTER_OPS
    not_asked = _metadata(any_broker, version, [topic], ask=False)
    assert [t.authorized_operations for t in not_asked.topics] == [None]
    if version <= 10:
        assert not_asked.authorized_operations is None


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_operations(any_broker, version):
    Req = DescribeClusterRequest[version]
    extra = {"endpoint_type": 1} if version >= 1 else {}
    with connect(any_broker) as s:
        asked = call(s, Req(include_cluster_authorized_operations=True, **extra))
        not_asked = call(s, Req(include_cluster_authorized_operations=False, **extra))
    assert (asked.error_code, asked.authorized_operations) == (0, CLUSTER_OPS)
    assert not_asked.authorized_operations is None


def test_describe_groups_operations(any_broker):
    group = f"ops-group-{uuid.uuid4().hex[:8]}"
    Req = DescribeGroupsRequest[5]
    with connect(any_broker) as s:
        # Kafka answers NOT_COORDINATOR until its offsets topic exists and is loaded.
        call(s, FindCoordinatorRequest[3](key_type=0, key=group))
        asked = eventually(lambda: call(s, Req(groups=[group],
                                               include_authorized_operations=True)).groups[0],
                           lambda g: g.error_code == 0, timeout=30)
        not_asked = call(s, Req(groups=[group], include_authorized_operations=False)).groups[0]
    assert (asked.error_code, asked.group_state, asked.authorized_operations) == \
        (0, "Dead", GROUP_OPS)
    assert not_asked.authorized_operations is None
