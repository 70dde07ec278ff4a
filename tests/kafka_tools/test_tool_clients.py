# Kafka 3.8.0's client-side tools against kafkalite and Apache Kafka: broker-api-versions
# (what both must agree on, the rest pinned), the perf-test producer and consumer (counts,
# never timings) and Kafka's system-test clients, kafka-verifiable-producer/-consumer (their
# JSON events: acks, offsets, commits, no errors). One topic serves the four client tools,
# so each broker costs four JVM starts.
from __future__ import annotations

import json
import re

from tests.helpers.real_kafka import create_topic
from tests.kafka_tools.conftest import run_tool

# "Name(key): 0 to 11 [usable: 11]", "Name(key): 0 [usable: 0]" or "Name(key): UNSUPPORTED".
API_LINE = re.compile(r"^\s*(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: \d+\]|UNSUPPORTED)",
                      re.M)
# Keys Kafka 3.8 serves to clients and kafkalite does not: delegation tokens,
# features, client metrics and UnregisterBroker (COMPATIBILITY.md,
# "Kafka's own tools"). A key leaving this set (served at last) or joining it flips the test.
KAFKA_ONLY = {"CreateDelegationToken", "DescribeDelegationToken",
              "ExpireDelegationToken", "ListClientMetricsResources", "RenewDelegationToken",
              "UnregisterBroker", "UpdateFeatures"}
VERIFY_TOPIC, RECORDS = "tools-verify", 120


def api_versions(bootstrap: str) -> dict[str, tuple[int, int] | None]:
    out = run_tool("kafka-broker-api-versions.sh", "--bootstrap-server", bootstrap)
    return {name: (int(lo), int(hi or lo)) if lo else None
            for name, _key, lo, hi in API_LINE.findall(out)}


def test_broker_api_versions(both: dict[str, str]) -> None:
    lite, kafka = (api_versions(both[n]) for n in ("kafkalite", "kafka"))
    # The tool lists every key its client knows, served or not, on both brokers alike.
    assert list(lite) == list(kafka) and len(lite) > 60
    served_lite = {n for n, r in lite.items() if r}
    served_kafka = {n for n, r in kafka.items() if r}
    assert served_lite <= served_kafka, served_lite - served_kafka
    assert served_kafka - served_lite == KAFKA_ONLY, served_kafka - served_lite
    # Ranges legitimately differ (kafkalite advertises Kafka 4.0's, KIP-896 minima and newer
    # maxima): every key both serve overlaps, so the tool's client finds a usable version.
    for name in served_lite:
        (a, b), (c, d) = lite[name], kafka[name]
        assert max(a, c) <= min(b, d), (name, lite[name], kafka[name])


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_clients(bootstrap: str) -> dict:
    create_topic(bootstrap, VERIFY_TOPIC, {"retention.ms": "86400000"}, partitions=2)
    half = str(RECORDS // 2)
    produced = events(run_tool("kafka-verifiable-producer.sh", "--bootstrap-server", bootstrap,
                               "--topic", VERIFY_TOPIC, "--max-messages", half, "--acks", "-1"))
    perf_out = run_tool("kafka-producer-perf-test.sh", "--topic", VERIFY_TOPIC, "--num-records",
                        half, "--record-size", "100", "--throughput", "-1", "--producer-props",
                        f"bootstrap.servers={bootstrap}", "acks=all")
    consumed = events(run_tool("kafka-verifiable-consumer.sh", "--bootstrap-server", bootstrap,
                               "--topic", VERIFY_TOPIC, "--group-id", "tools-verify-group",
                               "--max-messages", str(RECORDS), "--reset-policy", "earliest"))
    cperf = run_tool("kafka-consumer-perf-test.sh", "--bootstrap-server", bootstrap, "--topic",
                     VERIFY_TOPIC, "--messages", str(RECORDS), "--timeout", "30000",
                     "--group", "tools-perf-group").splitlines()
    header = next(i for i, line in enumerate(cperf) if line.startswith("start.time"))
    perf = dict(zip([h.strip() for h in cperf[header].split(",")],
                    [x.strip() for x in cperf[header + 1].split(",")]))
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    final: dict[int, int] = {}
    for c in commits:
        for o in c["offsets"]:
            final[o["partition"]] = max(final.get(o["partition"], 0), o["offset"])
    return {
        "producer_errors": [e for e in produced if e["name"] == "producer_send_error"],
        "acked": next(e for e in produced if e["name"] == "tool_data")["acked"],
        # Keyless records spread over partitions by the sticky partitioner, whose choice is
        # timing-dependent: compare the offsets each partition got, not which partition.
        "acked_offsets": sorted(sorted(e["offset"] for e in produced
                                       if e["name"] == "producer_send_success"
                                       and e["partition"] == p) for p in (0, 1)),
        "perf_sent": re.search(r"^(\d+) records sent", perf_out, re.M).group(1),
        "consumed": sum(e["count"] for e in consumed if e["name"] == "records_consumed"),
        "commits_failed": [c for c in commits if not c["success"]],
        "committed_total": sum(final.values()),
        "perf_messages": perf["data.consumed.in.nMsg"],
        "perf_mb": perf["data.consumed.in.MB"],
    }


def test_perf_and_verifiable_clients(both: dict[str, str]) -> None:
    lite, kafka = (run_clients(both[n]) for n in ("kafkalite", "kafka"))
    assert lite == kafka
    assert kafka["acked"] == RECORDS // 2 and kafka["perf_sent"] == str(RECORDS // 2)
    assert kafka["consumed"] == RECORDS and kafka["committed_total"] == RECORDS
    assert kafka["perf_messages"] == str(RECORDS)
