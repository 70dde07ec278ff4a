# Prometheus exposition of the broker's state, collected at scrape time from BrokerStats,
# the log manager and the group coordinator. Metric names follow the spirit of Kafka's JMX
# names (kafka_server_brokertopicmetrics_*, kafka_log_*), prefixed kafkalite_.
from __future__ import annotations

from typing import Iterator

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from .broker.registry import HANDLERS
from .broker.stats import LATENCY_BUCKETS

CONTENT_TYPE = CONTENT_TYPE_LATEST.encode()


class BrokerCollector:
    def __init__(self, broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator:
        b = self.broker
        st = b.stats
        req = CounterMetricFamily("kafkalite_requests", "Requests answered, by API and version",
                                  labels=["api", "version"])
        for (key, ver), n in sorted(st.requests.items()):
            h = HANDLERS.get(key)
            req.add_metric([h.name if h else str(key), str(ver)], n)
        yield req
        lat = HistogramMetricFamily("kafkalite_request_latency_seconds",
                                    "Time from a request's dispatch to its response",
                                    labels=["api"])
        for key, hist in sorted(st.latency.items()):
            h = HANDLERS.get(key)
            cum = 0
            buckets = []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), hist.counts):
                cum += count
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cum))
            lat.add_metric([h.name if h else str(key)], buckets, hist.total)
        yield lat
        for name, doc, data in (
                ("kafkalite_topic_bytes_in", "Record bytes appended, by topic", st.bytes_in),
                ("kafkalite_topic_bytes_out", "Record bytes fetched, by topic", st.bytes_out),
                ("kafkalite_topic_messages_in", "Records appended, by topic", st.messages_in)):
            fam = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, n in sorted(dict(data).items()):
                fam.add_metric([topic], n)
            yield fam
        yield GaugeMetricFamily("kafkalite_connections_active", "Open client connections",
                                value=st.connections)
        yield CounterMetricFamily("kafkalite_connections_accepted",
                                  "Client connections accepted", value=st.connections_total)
        yield GaugeMetricFamily("kafkalite_under_replicated_partitions",
                                "Always 0: a single broker has no followers", value=0)
        size = GaugeMetricFamily("kafkalite_log_size_bytes", "Bytes on disk per partition",
                                 labels=["topic", "partition"])
        end = GaugeMetricFamily("kafkalite_log_end_offset", "Log end offset per partition",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("kafkalite_log_start_offset", "Log start offset per partition",
                                  labels=["topic", "partition"])
        for p in list(b.logs.all_partitions()):
            labels = [p.topic, str(p.partition)]
            size.add_metric(labels, p.size)
            end.add_metric(labels, p.log_end_offset)
            start.add_metric(labels, p.log_start_offset)
        yield size
        yield end
        yield start
        lag = GaugeMetricFamily("kafkalite_consumer_group_lag",
                                "Log end offset minus committed offset",
                                labels=["group", "topic", "partition"])
        coordinator = b.groups
        for group in list(getattr(coordinator, "groups", {}).values()):
            for (topic, partition), committed in list(group.offsets.items()):
                p = b.logs.partition(topic, partition)
                if p is not None and committed.offset >= 0:
                    lag.add_metric([group.group_id, topic, str(partition)],
                                   max(p.log_end_offset - committed.offset, 0))
        yield lag
        txns = b.transactions
        if txns is not None:
            yield GaugeMetricFamily("kafkalite_transactions_open",
                                    "Transactions Ongoing or being completed",
                                    value=txns.open_transactions)
            yield CounterMetricFamily("kafkalite_transactions_committed",
                                      "Transactions committed", value=txns.committed)
            yield CounterMetricFamily("kafkalite_transactions_aborted",
                                      "Transactions aborted (by producers or timeouts)",
                                      value=txns.aborted)


def render(broker) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return generate_latest(registry)
