# The pipeline's transformations, as plain functions over DataFrames shaped like Spark's Kafka
# source (key, value, topic, partition, offset, timestamp, timestampType), so the same code runs
# on a stream from format("kafka") and on a batch DataFrame in tests.
#
#   parse_events     value bytes -> typed event columns plus `error` (null when valid)
#   valid_events / dead_letters   the two halves of that split
#   page_stats       1-minute tumbling event-time windows per page, 2-minute watermark
#   stats_to_kafka / dead_letters_to_kafka   (key, value) string columns for the Kafka sink
#
# A record is a dead letter when its value is not a JSON object matching EVENT_SCHEMA, lacks a
# required field, or has an action outside ACTIONS; the pipeline never fails on input data.
# unique_users is approx_count_distinct (HyperLogLog++, 5% relative error by default): exact
# distinct counts in a streaming aggregation would keep every user id in state.
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, DoubleType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from .events import ACTIONS

KAFKA_SOURCE_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])

CORRUPT = "_corrupt_record"
EVENT_FIELDS = ["event_id", "user_id", "session_id", "page", "url", "action", "referrer",
                "user_agent"]
EVENT_SCHEMA = StructType([*(StructField(n, StringType()) for n in EVENT_FIELDS),
                           StructField("event_time", LongType()),
                           StructField(CORRUPT, StringType())])
REQUIRED = ["event_id", "user_id", "page", "action", "event_time"]
STAT_COLUMNS = ["events", "views", "searches", "clicks", "purchases", "unique_users",
                "conversion_rate"]


def _error_reason(e: Column) -> Column:
    reason = F.when(F.col("value").isNull(), F.lit("empty value"))
    reason = reason.when(e.isNull() | e[CORRUPT].isNotNull(), F.lit("malformed JSON"))
    for name in REQUIRED:
        reason = reason.when(e[name].isNull(), F.lit(f"missing field {name}"))
    return reason.when(~e["action"].isin(*ACTIONS),
                       F.concat(F.lit("unknown action "), e["action"]))


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka-shaped rows -> event columns + `error` (null for a valid event) + source position."""
    e = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA,
                    {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    parsed = raw.withColumn("_e", e)
    return parsed.select(
        *(F.col("_e")[n].alias(n) for n in EVENT_FIELDS),
        F.col("_e")["event_time"].alias("event_time"),
        _error_reason(F.col("_e")).alias("error"),
        "key", "value", "topic", "partition", "offset", "timestamp")


def valid_events(parsed: DataFrame) -> DataFrame:
    return (parsed.where(F.col("error").isNull())
            .select(*EVENT_FIELDS, "event_time",
                    F.timestamp_millis("event_time").alias("event_ts")))


def dead_letters(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("error").isNotNull()).select(
        "key", "value", "error", "topic", "partition", "offset", "timestamp")


def page_stats(events: DataFrame, window: str = "1 minute",
               watermark: str = "2 minutes") -> DataFrame:
    """Per (window, page) counts. On a batch DataFrame the watermark is a no-op."""
    def n(action: str) -> Column:
        return F.count(F.when(F.col("action") == action, True))

    agg = (events.withWatermark("event_ts", watermark)
           .groupBy(F.window("event_ts", window).alias("window"), F.col("page"))
           .agg(F.count(F.lit(1)).alias("events"), n("view").alias("views"),
                n("search").alias("searches"), n("click").alias("clicks"),
                n("purchase").alias("purchases"),
                F.approx_count_distinct("user_id").alias("unique_users")))
    return agg.select(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
        "page", "events", "views", "searches", "clicks", "purchases", "unique_users",
        F.when(F.col("views") > 0, F.col("purchases") / F.col("views")).otherwise(F.lit(0.0))
        .alias("conversion_rate"))


def stats_to_kafka(stats: DataFrame) -> DataFrame:
    """key = page, value = JSON with window bounds (ISO-8601 UTC and epoch ms) and counts."""
    value = F.to_json(F.struct(
        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
        F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
        F.unix_millis("window_start").alias("window_start_ms"),
        F.unix_millis("window_end").alias("window_end_ms"),
        "page", *STAT_COLUMNS))
    return stats.select(F.col("page").alias("key"), value.alias("value"))


def dead_letters_to_kafka(dead: DataFrame) -> DataFrame:
    """key = original key; value = JSON envelope: the error, where it came from, the raw text."""
    value = F.to_json(F.struct(
        "error", F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"), F.col("offset").alias("source_offset"),
        F.unix_millis("timestamp").alias("source_timestamp_ms"),
        F.col("value").cast("string").alias("raw"),
        F.base64("value").alias("raw_base64")))
    return dead.select("key", value.alias("value"))


STATS_JSON_SCHEMA = StructType([
    StructField("window_start", StringType()), StructField("window_end", StringType()),
    StructField("window_start_ms", LongType()), StructField("window_end_ms", LongType()),
    StructField("page", StringType()), StructField("events", LongType()),
    StructField("views", LongType()), StructField("searches", LongType()),
    StructField("clicks", LongType()), StructField("purchases", LongType()),
    StructField("unique_users", LongType()),
    StructField("conversion_rate", DoubleType()),
])


def read_stats(kafka_rows: DataFrame) -> DataFrame:
    """page_stats records (as read with format("kafka")) back into columns."""
    return (kafka_rows.select(F.from_json(F.col("value").cast("string"), STATS_JSON_SCHEMA)
                              .alias("s"), "partition", "offset")
            .select("s.*", "partition", "offset"))
