# Prometheus exposition of the broker's state, collected at scrape time from BrokerStats,
# the log manager and the group coordinator. Metric names follow the spirit of Kafka's JMX
# names (kafka_server_brokertopicmetrics_*, kafka_log_*), prefixed kafkalite_; the log
# cleaner's gauges carry Kafka's own MBean names (kafka.log:type=LogCleaner,name=... as
# kafka_log_LogCleaner_..., dashes as underscores), so that Kafka dashboards find them; so do
# the replication and controller gauges of kafkalite/cluster/cluster_metrics.py.
from __future__ import annotations

from typing import Iterator

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from .broker.registry import HANDLERS
from .broker.stats import LATENCY_BUCKETS
from .cluster.cluster_metrics import cluster_metrics

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
        yield from cluster_metrics(b)
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
        yield from authentication_metrics(st)
        yield from cleaner_metrics(b)
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


AUTHENTICATION_METRICS = ("successful-authentication", "failed-authentication",
                          "successful-reauthentication", "failed-reauthentication")


def authentication_metrics(st) -> Iterator:
    """Kafka's socket-server-metrics authentication counters, per SASL listener
    (kafka.server:type=socket-server-metrics,listener=L ...-total). TLS handshake failures
    are not counted: the event loop's TLS layer fails them before a connection exists."""
    listeners = sorted({listener for listener, _ in st.authentications})
    for name in AUTHENTICATION_METRICS:
        fam = CounterMetricFamily("kafka_server_socket_server_metrics_" +
                                  name.replace("-", "_"), f"SASL {name.replace('-', ' ')}s",
                                  labels=["listener"])
        for listener in listeners:
            fam.add_metric([listener], st.authentications.get((listener, name), 0))
        yield fam


def cleaner_metrics(b) -> Iterator:
    """Kafka's LogCleaner and LogCleanerManager gauges, and the cleaner's byte counters."""
    cleaner = getattr(b.logs, "cleaner", None)
    if cleaner is None:
        return
    stats = list(cleaner.last_stats.values())
    read = sum(s.bytes_read for s in stats)
    written = sum(s.bytes_written for s in stats)
    for name, doc, value in (
            ("max_buffer_utilization_percent", "Fullest dedupe map of the threads' last "
             "cleanings, in percent", max((100 * s.buffer_utilization for s in stats),
                                          default=0)),
            ("cleaner_recopy_percent", "Bytes written over bytes read by the threads' last "
             "cleanings, in percent", 100 * written / max(read, 1)),
            ("max_clean_time_secs", "Longest of the threads' last cleanings, in seconds",
             max((s.elapsed_ms // 1000 for s in stats), default=0)),
            ("max_compaction_delay_secs", "How far past max.compaction.lag.ms the most "
             "overdue log was at the last choice, in seconds",
             max(cleaner.max_compaction_delay_ms // 1000, 0)),
            ("DeadThreadCount", "Cleaner threads that died", cleaner.dead_threads())):
        yield GaugeMetricFamily("kafka_log_LogCleaner_" + name, doc, value=int(value))
    yield GaugeMetricFamily("kafka_log_LogCleanerManager_max_dirty_percent",
                            "Dirty ratio of the dirtiest cleanable log, in percent",
                            value=int(100 * cleaner.max_dirty_ratio))
    last = cleaner.last_run_ms
    yield GaugeMetricFamily("kafka_log_LogCleanerManager_time_since_last_run_ms",
                            "Time since the cleaner last chose a log",
                            value=0 if last is None else max(cleaner.clock.wall_ms() - last, 0))
    failed = cleaner.uncleanable()
    for name, doc, value in (
            ("uncleanable_partitions_count", "Partitions a failed cleaning left alone",
             len(failed)),
            ("uncleanable_bytes", "Bytes of the partitions a failed cleaning left alone",
             sum(p.size for p in failed))):
        fam = GaugeMetricFamily("kafka_log_LogCleanerManager_" + name, doc,
                                labels=["logDirectory"])
        fam.add_metric([cleaner.data_dir], value)
        yield fam
    for name, doc, value in (
            ("kafkalite_log_cleaner_bytes_read", "Bytes the cleaner read from dirty "
             "segments", cleaner.bytes_read),
            ("kafkalite_log_cleaner_bytes_written", "Bytes the cleaner wrote into cleaned "
             "segments", cleaner.bytes_written),
            ("kafkalite_log_cleaner_cleanings", "Cleanings completed", cleaner.cleanings)):
        yield CounterMetricFamily(name, doc, value=value)


def render(broker) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return generate_latest(registry)
