# SingleNodeView, kafkalite without ZooKeeper, as the handlers see it: one broker that leads
# every existing partition at leader epoch 0, alone in its replicas and ISR, its own
# controller, advertised at the endpoint of the listener a request came through.
from __future__ import annotations

from kafkalite.broker.broker import Broker
from kafkalite.cluster.view import BrokerNode, PartitionState
from kafkalite.config import BrokerConfig
from kafkalite.security.listeners import Listener


def test_single_node_view(tmp_path) -> None:
    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path), "node.id": "7",
                                  "advertised.listeners": "PLAINTEXT://adv.example:9192"}))
    broker.open()
    try:
        view = broker.view
        broker.create_topic("t", 2, {})
        assert view.cluster_id == broker.logs.cluster_id != ""
        assert view.controller_id == 7
        assert view.partition("t", 1) == PartitionState(7, 0, (7,), (7,), ())
        assert view.partition("t", 2) is None and view.partition("nope", 0) is None
        assert view.partitions("t") == (PartitionState(7, 0, (7,), (7,), ()),) * 2
        assert view.partitions("nope") == ()
        assert view.is_leader("t", 0) and not view.is_leader("t", 2)
        assert view.brokers(None) == (BrokerNode(7, "adv.example", 9192),)
        inside = Listener("INTERNAL", "PLAINTEXT", "", 9300, "inner.example", 0)
        assert view.brokers(inside) == (BrokerNode(7, "inner.example", 9300),)
        assert view.broker(7, inside) == BrokerNode(7, "inner.example", 9300)
        assert view.broker(8, inside) is None
    finally:
        broker.close()
