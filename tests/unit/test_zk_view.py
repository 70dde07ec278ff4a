# Pieces of the ZooKeeper cluster view that need no ZooKeeper: Kafka's base64 topic ids as
# UUIDs, and the single-node view's answers the handlers now ask for (unchanged behaviour:
# one node leads every partition it has at leader epoch 0).
from __future__ import annotations

import uuid

from kafkalite.cluster.view import SingleNodeView
from kafkalite.cluster.zk_view import ZERO_UUID, topic_uuid
from kafkalite.config import BrokerConfig
from kafkalite.broker.broker import Broker
from kafkalite.log.datadir import uuid_b64
from kafkalite.wire.errors import ErrorCode


def test_topic_ids_read_back_as_kafka_wrote_them():
    for u in (uuid.uuid4(), uuid.UUID(int=1), uuid.UUID(int=(1 << 128) - 1)):
        assert topic_uuid(uuid_b64(u)) == u
    assert topic_uuid(None) == ZERO_UUID and topic_uuid("") == ZERO_UUID


def test_single_node_leadership_answers(tmp_path):
    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path)}))
    broker.open()
    try:
        broker.logs.create_topic("t", 2)
        view = broker.view
        assert isinstance(view, SingleNodeView) and view.auto_create_locally
        assert view.topic_names() == ["t"] and view.topic("t") is broker.logs.get("t")
        assert view.topic_by_id(broker.logs.get("t").topic_id) is broker.logs.get("t")
        assert [view.leader_error("t", 1, e) for e in (-1, 0, 1)] == \
            [ErrorCode.none, ErrorCode.none, ErrorCode.unknown_leader_epoch]
        assert view.leader_error("t", 2, -1) == ErrorCode.unknown_topic_or_partition
        assert view.leader_error("nope", 0, 5) == ErrorCode.unknown_topic_or_partition
        assert view.leader_epoch("t", 0) == 0
    finally:
        broker.close()
