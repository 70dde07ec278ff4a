"""PySpark Structured Streaming pipeline that reads and writes kafkalite with format("kafka").

Entry points: `python -m spark_pipeline.generate` (clickstream events), `python -m
spark_pipeline.job` (the streaming job), `python -m spark_pipeline.demo` (both, against a
temporary broker). pyspark is an optional dependency; only the modules that build DataFrames
import it.
"""
