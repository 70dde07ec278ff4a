# The transformation functions on DataFrames shaped exactly like Spark's Kafka source, without
# the connector: batch DataFrames for counts and dead letters, and a real streaming query over
# Parquet files (one file per micro-batch) for the watermark, since a batch DataFrame ignores
# watermarks. That streaming run is also checked against the reference model in events.py,
# which the end-to-end test relies on.
from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from spark_pipeline import transform as t  # noqa: E402
from spark_pipeline.events import ClickstreamGenerator, expected_page_stats  # noqa: E402

MIN = 60_000
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def kafka_frame(spark, values: list, keys: list | None = None, topic: str = "clickstream"):
    """Rows with the Kafka source's columns and types; offsets count from 0."""
    rows = []
    for i, v in enumerate(values):
        k = keys[i] if keys else None
        v = v.encode() if isinstance(v, str) else v
        # an aware datetime: pyspark would read a naive one in the local time zone
        rows.append((k, v, topic, 0, i, dt.datetime.fromtimestamp(T0 / 1000 + i, dt.timezone.utc),
                     0))
    return spark.createDataFrame(rows, t.KAFKA_SOURCE_SCHEMA)


def stats_by_key(df) -> dict:
    """{(window start ms, page): counts}; times as epoch ms, whatever the local time zone."""
    from pyspark.sql import functions as F

    out = {}
    for r in df.withColumn("start_ms", F.unix_millis("window_start")).collect():
        d = r.asDict()
        assert d.pop("window_end") - d.pop("window_start") == dt.timedelta(minutes=1)
        out[(d.pop("start_ms"), d.pop("page"))] = d
    return out


def assert_matches_model(actual: dict, expected: dict) -> None:
    assert set(actual) == set(expected)
    for key, exp in expected.items():
        got = dict(actual[key])
        est, exact = got.pop("unique_users"), exp["unique_users"]
        # HyperLogLog++ at 5% relative error: small counts are near exact, never far off
        assert abs(est - exact) <= max(1, round(0.1 * exact)), (key, est, exact)
        assert got == {k: v for k, v in exp.items() if k != "unique_users"}, key


def test_page_stats_per_window_match_the_generated_events(spark):
    recs = list(ClickstreamGenerator(seed=21, rate=2, start_ms=T0 + 10_000, late_ratio=0.05,
                                     bad_ratio=0.03).records(600))
    raw = kafka_frame(spark, [r.value for r in recs], [r.key for r in recs])
    parsed = t.parse_events(raw)
    stats = stats_by_key(t.page_stats(t.valid_events(parsed)))
    events = [r.event for r in recs if r.event is not None]
    # one batch, no earlier watermark: every window is counted and still open
    model = expected_page_stats([events])
    assert model.emitted == {} and len(model.open_windows) > 50
    assert_matches_model(stats, model.open_windows)
    assert sum(s["events"] for s in stats.values()) == len(events)
    assert t.dead_letters(parsed).count() == len(recs) - len(events) > 0


def test_bad_records_become_dead_letters_with_a_reason(spark):
    good = {"event_id": "e1", "user_id": "u1", "session_id": "s1", "page": "/", "url": "x",
            "action": "view", "referrer": "", "user_agent": "ua", "event_time": T0}
    values = [
        json.dumps(good),
        json.dumps(good)[:30],
        b"\xff\xfe\x00binary",
        json.dumps({k: v for k, v in good.items() if k != "event_time"}),
        json.dumps({**good, "action": "hover"}),
        None,
        json.dumps([good]),
        json.dumps({**good, "event_time": "yesterday"}),
        json.dumps({k: v for k, v in good.items() if k != "user_id"}),
        json.dumps({**good, "extra": 1, "referrer": None}),
    ]
    parsed = t.parse_events(kafka_frame(spark, values, [b"k%d" % i for i in range(len(values))]))
    dead = {r["offset"]: r for r in t.dead_letters(parsed).collect()}
    assert {o: r["error"] for o, r in dead.items()} == {
        1: "malformed JSON", 2: "malformed JSON", 3: "missing field event_time",
        4: "unknown action hover", 5: "empty value", 6: "malformed JSON",
        7: "malformed JSON", 8: "missing field user_id"}
    from pyspark.sql import functions as F

    valid = t.valid_events(parsed).withColumn("ts_ms", F.unix_millis("event_ts")).collect()
    assert [r["event_id"] for r in valid] == ["e1", "e1"]
    assert [r["ts_ms"] for r in valid] == [T0, T0]

    envelopes = t.dead_letters_to_kafka(t.dead_letters(parsed)).collect()
    first = json.loads(envelopes[0]["value"])
    assert envelopes[0]["key"] == b"k1"
    assert first["error"] == "malformed JSON" and first["source_offset"] == 1
    assert first["raw"] == json.dumps(good)[:30] and first["source_topic"] == "clickstream"


def test_stats_value_json_round_trips(spark):
    ev = {"event_id": "e", "user_id": "u", "session_id": "s", "page": "/checkout", "url": "x",
          "referrer": "", "user_agent": "ua"}
    values = [json.dumps({**ev, "action": a, "event_time": T0 + 5_000 + i})
              for i, a in enumerate(["view", "view", "purchase", "click"])]
    stats = t.page_stats(t.valid_events(t.parse_events(kafka_frame(spark, values))))
    out = t.stats_to_kafka(stats).collect()
    assert [r["key"] for r in out] == ["/checkout"]
    assert json.loads(out[0]["value"]) == {
        "window_start": "2024-01-01T00:00:00Z", "window_end": "2024-01-01T00:01:00Z",
        "window_start_ms": T0, "window_end_ms": T0 + MIN, "page": "/checkout", "events": 4,
        "views": 2, "searches": 0, "clicks": 1, "purchases": 1, "unique_users": 1,
        "conversion_rate": 0.5}


def ev_json(minute: float, page: str, user: str) -> dict:
    return {"event_id": f"{page}-{minute}", "user_id": user, "session_id": "s", "page": page,
            "url": "u", "action": "view", "referrer": "", "user_agent": "ua",
            "event_time": T0 + int(minute * MIN)}


def test_watermark_drops_late_rows_in_a_real_stream(spark, tmp_path):
    batches = [
        [ev_json(m, p, f"u{i}") for i, (m, p) in enumerate(
            [(0.2, "/a"), (0.7, "/b"), (1.3, "/a"), (1.8, "/a"), (2.5, "/b"), (3.2, "/a"),
             (4.7, "/b"), (5.0, "/a")])],                    # watermark afterwards: 3:00
        [ev_json(5.3, "/a", "u1"), ev_json(6.0, "/b", "u2"),
         ev_json(2.7, "/b", "u9")],   # late, but filtered with batch 0's watermark (0): kept
        [ev_json(1.5, "/a", "u7"),    # window [1,2) ends at or before 3:00: dropped
         ev_json(4.2, "/b", "u8"),    # window [4,5) still open: kept
         ev_json(9.0, "/a", "u1")],   # moves the watermark to 7:00
    ]
    src = tmp_path / "in"
    src.mkdir()
    for i, batch in enumerate(batches):  # one Parquet file per micro-batch, in mtime order
        stage = tmp_path / f"stage{i}"
        kafka_frame(spark, [json.dumps(e) for e in batch]).coalesce(1).write.parquet(str(stage))
        part = next(p for p in os.listdir(stage) if p.endswith(".parquet"))
        dest = src / f"batch{i}.parquet"
        shutil.move(str(stage / part), dest)
        os.utime(dest, (1_700_000_000 + i * 100,) * 2)

    stream = (spark.readStream.schema(t.KAFKA_SOURCE_SCHEMA).option("maxFilesPerTrigger", 1)
              .parquet(str(src)))
    stats = t.page_stats(t.valid_events(t.parse_events(stream)))
    q = (stats.writeStream.format("memory").queryName("wm_stream_test").outputMode("append")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(240), "streaming query did not finish within 240 s"
        inputs = [p["numInputRows"] for p in q.recentProgress]
        got = stats_by_key(spark.table("wm_stream_test"))
    finally:
        q.stop()
    # three data batches, then the no-data batch that applies the final watermark
    assert inputs == [8, 3, 3, 0]
    model = expected_page_stats(batches + [[]])
    assert_matches_model(got, model.emitted)
    assert got[(T0 + MIN, "/a")]["events"] == 2           # 1:30 was dropped
    assert got[(T0 + 2 * MIN, "/b")]["events"] == 2       # 2:30 and the kept 2:42
    assert got[(T0 + 4 * MIN, "/b")]["events"] == 2       # 4:42 and the late 4:12
    assert (T0 + 9 * MIN, "/a") not in got                # still open at watermark 7:00
    assert [e["event_id"] for e in model.dropped] == ["/a-1.5"]
