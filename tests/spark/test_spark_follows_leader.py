# Spark follows a leadership change (issue 17, the Java client as Spark uses it): Spark 4.0's
# Kafka connector (kafka-clients 3.9) on three kafkalite brokers on ZooKeeper, an RF=3,
# min.insync.replicas=2 topic. A Structured Streaming query (all three brokers as bootstrap,
# startingOffsets earliest, a 1 s processing-time trigger, a memory sink) has read the first
# records, confluent-kafka's and a batch df.write.format("kafka")'s (whose producer Spark
# caches, so it still knows the old leader afterwards); the partition's leader is SIGKILLed;
# confluent-kafka (acks=all) and the cached Spark producer write more, finding the leader the
# controller elects. The query, never restarted, ends with every value exactly once, and a
# batch read of the topic returns the same; the killed broker then rejoins the ISR.
from __future__ import annotations

import time
import uuid

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from tests.cluster.test_membership import (WAIT_S, brokers, connect, registered,  # noqa: E402,F401
                                           zk)
from tests.cluster.test_replication import (TOPIC, cluster, produce_all, state,  # noqa: E402
                                            wait_isr)
from tests.helpers.real_kafka import eventually  # noqa: E402

N = 200  # confluent-kafka's records, before the kill and again after it
M = 50  # Spark's batch write's records, before the kill and again after it
QUERY_WAIT_S = 60.0  # micro-batches of 1 s; the executor's consumer waits out the election


def spark_write(spark, servers: str, values: list[str]) -> None:
    (spark.createDataFrame([(v,) for v in values], "value string").write.format("kafka")
     .option("kafka.bootstrap.servers", servers).option("topic", TOPIC).save())


def read_values(reader, servers: str):
    # The driver's AdminClient (kafka-clients 3.9) sends a ListOffsets to the leader its
    # Metadata named; when that broker dies and leaves the Metadata, the call waits for the
    # node to come back (its ConstantNodeIdProvider, as we read it) until
    # default.api.timeout.ms (60 s), then Spark retries with a fresh AdminClient
    # (fetchOffset.numRetries). The first run stalled one micro-batch 62 s so; with 10 s the
    # stall is ~12 s and the retry still has to find the new leader. (The AdminClient refuses
    # a default.api.timeout.ms below request.timeout.ms.)
    return (reader.format("kafka").option("kafka.bootstrap.servers", servers)
            .option("kafka.request.timeout.ms", "5000")
            .option("kafka.default.api.timeout.ms", "10000")
            .option("subscribe", TOPIC).option("startingOffsets", "earliest").load()
            .selectExpr("CAST(value AS STRING) AS value"))


def sink_values(spark, table: str) -> list[str]:
    return sorted(r["value"] for r in spark.table(table).collect())


def sink_reaches(spark, table: str, query, expected: list[str]) -> list[str]:
    """The sink's values once they number len(expected), or as they are when the query has
    died (bounded: QUERY_WAIT_S)."""
    got = eventually(lambda: sink_values(spark, table),
                     lambda g: len(g) >= len(expected) or not query.isActive,
                     timeout=QUERY_WAIT_S, interval=0.5)
    assert query.isActive and query.exception() is None, query.exception()
    return got


@pytest.mark.timeout(240)
def test_a_running_query_and_the_batch_writer_follow_a_killed_leader(kafka_spark, brokers,
                                                                      zk, tmp_path):  # noqa: F811
    spark, t0 = kafka_spark, time.monotonic()
    procs, z = cluster(brokers, zk, topic_configs={"min.insync.replicas": "2"},
                       **{"offsets.topic.replication.factor": "3"})
    ids = set(procs)
    servers = ",".join(b.bootstrap for b in procs.values())
    before = [f"ck-before-{i}" for i in range(N)]
    assert produce_all(servers, [v.encode() for v in before]) == []
    spark_before = [f"spark-before-{i}" for i in range(M)]
    spark_write(spark, servers, spark_before)
    expected = sorted(before + spark_before)

    table = f"follow_{uuid.uuid4().hex[:8]}"
    query = (read_values(spark.readStream, servers).writeStream.format("memory")
             .queryName(table).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="1 second").start())
    try:
        assert sink_reaches(spark, table, query, expected) == expected
        print(f"\n{time.monotonic() - t0:.1f} s: the query has read the first {len(expected)}")

        lead = state(z).leader
        procs[lead].kill()
        after = [f"ck-after-{i}" for i in range(N)]
        # the first sends find no leader until the controller elects one (a session timeout)
        assert produce_all(servers, [v.encode() for v in after]) == []
        new = state(z).leader
        assert new not in (lead, -1), state(z)
        spark_after = [f"spark-after-{i}" for i in range(M)]
        spark_write(spark, servers, spark_after)  # its cached producer knew only `lead`
        expected = sorted(expected + after + spark_after)
        print(f"{time.monotonic() - t0:.1f} s: leader {lead} killed, {new} leads, "
              f"{2 * N + 2 * M} written")

        sink_reaches(spark, table, query, expected)
        time.sleep(2)  # two more triggers: a duplicate arriving late would show
        got = sink_values(spark, table)
        assert query.isActive and query.exception() is None, query.exception()
        assert len(got) == len(expected), (len(got), len(expected))
        assert got == expected, sorted(set(expected) ^ set(got))[:10]
        slowest = max(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress)
        print(f"{time.monotonic() - t0:.1f} s: the query holds all {len(got)}, once each; "
              f"its slowest micro-batch took {slowest} ms")
    finally:
        query.stop()
    assert sorted(r["value"] for r in read_values(spark.read, servers).collect()) == expected

    registered(z, ids - {lead})  # its session has expired: it can register again
    procs[lead].start()
    assert wait_isr(z, lambda s: s == ids) == ids
    print(f"{time.monotonic() - t0:.1f} s: broker {lead} is back in the ISR")
