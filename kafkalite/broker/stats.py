# Counters the hot paths bump with plain dict arithmetic; kafkalite.metrics turns them into
# Prometheus families at scrape time, so serving a request never touches prometheus-client.
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

# Seconds; like Kafka's request-latency percentiles, but as Prometheus buckets.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)


class Histogram:
    __slots__ = ("counts", "total", "n")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds
        self.n += 1


class BrokerStats:
    def __init__(self) -> None:
        self.requests: defaultdict[tuple[int, int], int] = defaultdict(int)
        self.latency: defaultdict[int, Histogram] = defaultdict(Histogram)
        self.bytes_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_out: defaultdict[str, int] = defaultdict(int)
        self.messages_in: defaultdict[str, int] = defaultdict(int)
        self.connections = 0
        self.connections_total = 0
        # (listener, Kafka's socket-server-metrics name) -> count, e.g. failed-authentication
        self.authentications: defaultdict[tuple[str, str], int] = defaultdict(int)

    def request_done(self, api_key: int, version: int, seconds: float) -> None:
        self.requests[(api_key, version)] += 1
        self.latency[api_key].observe(seconds)

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        self.bytes_in[topic] += nbytes
        self.messages_in[topic] += records

    def fetched(self, topic: str, nbytes: int) -> None:
        self.bytes_out[topic] += nbytes
