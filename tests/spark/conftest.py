# One SparkSession for the whole test session (Spark is heavy on a 2-core machine), with the
# Kafka connector when it can be resolved. Tests that need Spark skip with the reason when
# pyspark or Java 17+ is missing; tests that need format("kafka") skip with the connector
# resolver's own message when the connector is missing. The connector's jars come from
# KAFKALITE_SPARK_JARS when set, else from the shared anchors (`../shared/anchors/
# spark-connector` from the repository root, else /work/shared/anchors/spark-connector; its
# README: the four jars Spark 4.0.0 needs), passed as spark.jars and never copied; without
# either, resolution is offline (~/.m2) unless KAFKALITE_SPARK_ONLINE=1.
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from spark_pipeline.connector import JARS_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONNECTOR_ANCHORS = (os.path.join(ROOT, "..", "shared", "anchors", "spark-connector"),
                     "/work/shared/anchors/spark-connector")


def connector_jars() -> str | None:
    """The jars (files or directories, comma-separated) the tests give Spark and the job's
    command line, or None to let the resolver look in ~/.m2."""
    if os.environ.get(JARS_ENV):
        return os.environ[JARS_ENV]
    for path in CONNECTOR_ANCHORS:
        if os.path.isdir(path) and any(n.endswith(".jar") for n in os.listdir(path)):
            return os.path.abspath(path)
    return None


@dataclass
class SparkEnv:
    session: Any = None
    skip_reason: str | None = None
    connector_reason: str | None = None
    jars: str | None = None  # what the connector plan was given: pass it on to the job's CLI


@pytest.fixture(scope="session")
def spark_env() -> Iterator[SparkEnv]:
    if importlib.util.find_spec("pyspark") is None:
        yield SparkEnv(skip_reason="pyspark is not installed (pip install -e '.[spark]')")
        return
    from spark_pipeline.connector import ConnectorError, plan_connector
    from spark_pipeline.session import build_session, java_problem

    problem = java_problem()
    if problem:
        yield SparkEnv(skip_reason=problem)
        return
    env = SparkEnv(jars=connector_jars())
    plan = None
    try:
        # Offline unless asked: a resolution attempt against unreachable remote repositories
        # costs a JVM start and Ivy's timeouts before it fails.
        plan = plan_connector(env.jars,
                              offline=os.environ.get("KAFKALITE_SPARK_ONLINE") != "1")
    except ConnectorError as exc:
        env.connector_reason = str(exc)
    try:
        env.session = build_session("kafkalite-spark-tests", plan)
    except ConnectorError as exc:
        env.connector_reason = str(exc)
        plan.cleanup()
        plan = None
        env.session = build_session("kafkalite-spark-tests", None)
    try:
        yield env
    finally:
        env.session.stop()
        if plan is not None:
            plan.cleanup()


@pytest.fixture
def spark(spark_env: SparkEnv):
    if spark_env.skip_reason:
        pytest.skip(spark_env.skip_reason)
    return spark_env.session


@pytest.fixture
def kafka_spark(spark_env: SparkEnv):
    """The session, only when it has Spark's Kafka connector."""
    if spark_env.skip_reason:
        pytest.skip(spark_env.skip_reason)
    if spark_env.connector_reason:
        pytest.skip(spark_env.connector_reason)
    return spark_env.session
