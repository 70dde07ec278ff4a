# The replication and controller gauges Kafka brokers export, under the MBean names that
# Kafka dashboards and alerts use (kafka.server:type=ReplicaManager,name=X as
# kafka_server_ReplicaManager_X, as metrics.py names the log cleaner's), collected at scrape
# time from the broker's cluster view: the ZooKeeper-backed one in a cluster, SingleNodeView
# alone (where every partition is led here and in sync, and the node is its own controller).
#
# Per broker, as Kafka counts them:
#   UnderReplicatedPartitions   partitions this broker leads whose ISR is smaller than the
#                               replicas (ReplicaManager)
#   UnderMinIsrPartitionCount   partitions this broker leads whose ISR is smaller than the
#                               topic's min.insync.replicas
#   LeaderCount, PartitionCount partitions led here, partitions with a replica here
#   IsrShrinksPerSec/IsrExpands the leader's ISR changes (the replication layer's counters,
#                               0 before it exists); exported as counters (_total), the
#                               Count of Kafka's meters
#   OfflinePartitionsCount      partitions without a live leader: reported by the active
#                               controller only, 0 elsewhere (KafkaController)
#   ActiveControllerCount       1 on the controller, 0 elsewhere
#   ControllerChangeRateAndTimeMs  controller elections this broker has seen (ControllerStats;
#                               its Count, as a counter)
from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

MIN_ISR = "min.insync.replicas"


def partition_counts(broker: Any) -> dict[str, int]:
    """This broker's partition gauges from its cluster view (and local topic configs)."""
    view = broker.view
    me = view.node_id
    live = {b.node_id for b in view.brokers(None)}
    counts = dict.fromkeys(("under_replicated", "under_min_isr", "leaders", "partitions",
                            "offline"), 0)
    for topic in list(view.topic_names()):
        min_isr = _min_isr(broker, topic)
        for state in view.partitions(topic):
            if me in state.replicas:
                counts["partitions"] += 1
            if state.leader < 0 or state.leader not in live:
                counts["offline"] += 1
            if state.leader != me:
                continue
            counts["leaders"] += 1
            if len(state.isr) < len(state.replicas):
                counts["under_replicated"] += 1
            if len(state.isr) < min_isr:
                counts["under_min_isr"] += 1
    return counts


def _min_isr(broker: Any, topic: str) -> int:
    """The topic's min.insync.replicas as this broker's log of it has it (1 without one)."""
    logs = broker.logs
    local = logs.get(topic)
    if local is None:
        return 1
    return int(logs.effective(local.configs, MIN_ISR))


def isr_changes(broker: Any) -> tuple[int, int]:
    """(shrinks, expands) from the replication layer, (0, 0) where there is none."""
    replication = getattr(broker, "replication", None)
    return (int(getattr(replication, "isr_shrinks", 0) or 0),
            int(getattr(replication, "isr_expands", 0) or 0))


def cluster_metrics(broker: Any) -> Iterator:
    view = broker.view
    counts = partition_counts(broker)
    active = view.controller_id == view.node_id
    # kafkalite's own name from before the cluster, kept for existing dashboards
    yield GaugeMetricFamily("kafkalite_under_replicated_partitions",
                            "Partitions led here whose ISR is smaller than their replicas",
                            value=counts["under_replicated"])
    for name, doc, value in (
            ("UnderReplicatedPartitions", "Partitions led here whose ISR is smaller than "
             "their replicas", counts["under_replicated"]),
            ("UnderMinIsrPartitionCount", "Partitions led here whose ISR is smaller than "
             "min.insync.replicas", counts["under_min_isr"]),
            ("LeaderCount", "Partitions led by this broker", counts["leaders"]),
            ("PartitionCount", "Partitions with a replica on this broker",
             counts["partitions"])):
        yield GaugeMetricFamily("kafka_server_ReplicaManager_" + name, doc, value=value)
    shrinks, expands = isr_changes(broker)
    yield CounterMetricFamily("kafka_server_ReplicaManager_IsrShrinksPerSec",
                              "ISR shrinks of partitions led here", value=shrinks)
    yield CounterMetricFamily("kafka_server_ReplicaManager_IsrExpandsPerSec",
                              "ISR expansions of partitions led here", value=expands)
    yield GaugeMetricFamily("kafka_controller_KafkaController_ActiveControllerCount",
                            "1 on the active controller, else 0", value=int(active))
    yield GaugeMetricFamily("kafka_controller_KafkaController_OfflinePartitionsCount",
                            "Partitions without a live leader (on the active controller; "
                            "0 elsewhere)", value=counts["offline"] if active else 0)
    yield CounterMetricFamily("kafka_controller_ControllerStats_ControllerChangeRateAndTimeMs",
                              "Controller elections this broker has seen",
                              value=int(getattr(view, "controller_changes", 0)))
