# End to end through Spark's Kafka connector (the Java client) against a kafkalite broker:
# the generator CLI produces events, the job reads them with readStream.format("kafka") and
# writes windows with writeStream.format("kafka"); the windows read back equal the reference
# model's; after more events, the job restarted from its checkpoint in a fresh JVM (the CLI)
# adds the newly closed windows and re-emits none. Batch reads with per-partition offsets and
# with timestamps exercise ListOffsets through the Java AdminClient. Skipped, with the
# resolver's message, when the connector cannot be resolved.
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from kafkalite.testing import BrokerProcess  # noqa: E402
from spark_pipeline import transform as t  # noqa: E402
from spark_pipeline.connector import JARS_ENV  # noqa: E402
from spark_pipeline.events import ClickstreamGenerator, expected_page_stats  # noqa: E402
from spark_pipeline.generate import produce  # noqa: E402
from spark_pipeline.job import JobOptions, run  # noqa: E402

from .test_transform import assert_matches_model, stats_by_key  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIN = 60_000
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory, spark_env):
    bp = BrokerProcess(data_dir=str(tmp_path_factory.mktemp("kafkalite")),
                       settings={"num.partitions": str(PARTITIONS)})
    bp.start()
    try:
        yield bp
    finally:
        if spark_env.session is not None:
            # Spark keeps its Kafka producers cached for minutes; they would warn about the
            # stopped broker until the session ends
            spark_env.session.sparkContext.setLogLevel("ERROR")
        bp.cleanup()


def read_topic(spark, bootstrap: str, topic: str, **options):
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def stats_from_kafka(spark, bootstrap: str):
    """page_stats as the job wrote it, with window bounds as timestamps for stats_by_key."""
    from pyspark.sql import functions as F

    df = t.read_stats(read_topic(spark, bootstrap, "page_stats"))
    # the ISO strings and the epoch milliseconds in each value agree
    assert df.where(F.to_timestamp("window_start") != F.timestamp_millis("window_start_ms"))\
        .count() == 0
    return df.select(F.timestamp_millis("window_start_ms").alias("window_start"),
                     F.timestamp_millis("window_end_ms").alias("window_end"), "page",
                     *t.STAT_COLUMNS)


def python_env(jars: str | None = None) -> dict:
    """The environment of the pipeline's command lines: this checkout's code, and the
    connector jars the session's Spark was given (KAFKALITE_SPARK_JARS), if any."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if jars:
        env[JARS_ENV] = jars
    return env


@pytest.mark.timeout(900)
def test_stream_to_kafka_and_resume_from_checkpoint(kafka_spark, spark_env, broker, tmp_path):
    spark, bootstrap = kafka_spark, broker.bootstrap
    began = time.monotonic()
    start = (int(time.time() * 1000) // MIN - 30) * MIN  # recent: within retention
    gen1 = dict(seed=11, rate=2, start_ms=start, late_ratio=0.05, bad_ratio=0.02)
    n1 = 600  # 300 s of event time
    cli = subprocess.run(
        [sys.executable, "-m", "spark_pipeline.generate", "--bootstrap", bootstrap,
         "--topic", "clickstream", "--rate", "2", "--duration", "300", "--seed", "11",
         "--start-ms", str(start), "--speedup", "0", "--late-ratio", "0.05",
         "--bad-ratio", "0.02"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=python_env())
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "done: 600 events to 'clickstream'" in cli.stdout
    recs1 = list(ClickstreamGenerator(**gen1).records(n1))
    events1 = [r.event for r in recs1 if r.event is not None]

    ck, pq = str(tmp_path / "checkpoint"), str(tmp_path / "parquet")
    opts = JobOptions(bootstrap=bootstrap, checkpoint=ck, parquet=pq)
    run(spark, opts)
    # available-now: one batch with all the data, then the no-data batch for the watermark
    model1 = expected_page_stats([events1, []])
    got1 = stats_from_kafka(spark, bootstrap)
    assert got1.count() == len(model1.emitted) > 0
    assert any(ws >= start for ws, _ in model1.emitted)  # not only windows of late events
    assert_matches_model(stats_by_key(got1), model1.emitted)

    # more events, continuing the timeline; the restarted job must pick up only these
    # a quarter late, so that several fall behind the watermark the first run left
    gen2 = dict(seed=12, rate=2, start_ms=start + n1 * 500, late_ratio=0.25, bad_ratio=0.02)
    recs2 = list(ClickstreamGenerator(**gen2).records(n1))
    with open(os.devnull, "w") as quiet:
        stats = produce(bootstrap, "clickstream", ClickstreamGenerator(**gen2), n1, speedup=0,
                        out=quiet)
    assert stats.produced == n1 and stats.failed == 0
    events2 = [r.event for r in recs2 if r.event is not None]

    job = subprocess.run(
        [sys.executable, "-m", "spark_pipeline.job", "--bootstrap", bootstrap,
         "--checkpoint", ck, "--parquet", pq, "--trigger", "available-now", "--offline"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=python_env(spark_env.jars))
    assert job.returncode == 0, job.stdout + job.stderr[-5000:]
    assert f"page_stats: 2 batches in this run, {n1} input rows" in job.stdout, job.stdout

    model = expected_page_stats([events1, [], events2, []])
    assert model.dropped, "seed should produce events later than the watermark"
    assert set(model1.emitted) < set(model.emitted)
    all_stats = stats_from_kafka(spark, bootstrap)
    keys = [(r["window_start"], r["page"]) for r in all_stats.collect()]
    assert len(keys) == len(set(keys)), "a window was emitted twice"
    assert_matches_model(stats_by_key(all_stats), model.emitted)
    # the Parquet copy holds the same windows
    assert_matches_model(stats_by_key(spark.read.parquet(pq)), model.emitted)

    dlq = read_topic(spark, bootstrap, "clickstream_dlq").collect()
    bad = [r for r in recs1 + recs2 if r.event is None]
    assert sorted(bytes(r["key"]) for r in dlq) == sorted(r.key for r in bad)
    assert {json.loads(r["value"])["source_topic"] for r in dlq} == {"clickstream"}
    # the Java clients (AdminClient, assign()-mode consumer, idempotent producer) must not
    # have tripped the broker
    problems = [ln for ln in broker.read_log().splitlines()
                if " ERROR " in ln or " WARNING " in ln or "Traceback" in ln]
    assert not problems, "\n".join(problems[:20])
    print(f"\ne2e: {len(keys)} windows, {len(model.dropped)} late rows dropped, "
          f"{len(dlq)} dead letters, {time.monotonic() - began:.0f}s")


def test_batch_read_by_offsets_and_timestamps(kafka_spark, broker):
    from confluent_kafka import Producer

    spark, bootstrap, topic = kafka_spark, broker.bootstrap, "offsets_by_time"
    base = (int(time.time() * 1000) // 1000 - 600) * 1000
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(PARTITIONS):
        for i in range(10):
            p.produce(topic, f"v{part}-{i}".encode(), f"k{part}-{i}".encode(),
                      partition=part, timestamp=base + i * 1000)
    assert p.flush(30) == 0

    def read(**options) -> set[tuple[int, int]]:
        rows = read_topic(spark, bootstrap, topic, **options).collect()
        for r in rows:  # values, keys and timestamps come back as produced
            i = int(r["offset"])
            assert bytes(r["value"]) == f"v{r['partition']}-{i}".encode()
            assert bytes(r["key"]) == f"k{r['partition']}-{i}".encode()
            assert r["timestampType"] == 0
        return {(r["partition"], r["offset"]) for r in rows}

    def span(part: int, first: int, end: int) -> set[tuple[int, int]]:
        return {(part, o) for o in range(first, end)}

    assert read() == span(0, 0, 10) | span(1, 0, 10) | span(2, 0, 10)
    assert read(startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": 5}}),
                endingOffsets=json.dumps({topic: {"0": 7, "1": 3, "2": -1}})) \
        == span(0, 2, 7) | span(1, 0, 3) | span(2, 5, 10)
    assert read(startingTimestamp=str(base + 4_500)) \
        == span(0, 5, 10) | span(1, 5, 10) | span(2, 5, 10)
    assert read(startingTimestamp=str(base + 4_500), endingTimestamp=str(base + 7_000)) \
        == span(0, 5, 7) | span(1, 5, 7) | span(2, 5, 7)
    by_partition = {topic: {"0": base, "1": base + 8_000, "2": base + 60_000}}
    assert read(startingOffsetsByTimestamp=json.dumps(by_partition),
                startingOffsetsByTimestampStrategy="latest") == span(0, 0, 10) | span(1, 8, 10)
