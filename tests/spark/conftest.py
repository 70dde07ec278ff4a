# One SparkSession for the whole test session (Spark is heavy on a 2-core machine), with the
# Kafka connector when it can be resolved. Tests that need Spark skip with the reason when
# pyspark or Java 17+ is missing; tests that need format("kafka") skip with the connector
# resolver's own message when the connector is missing. Resolution is offline (~/.m2 or
# KAFKALITE_SPARK_JARS) unless KAFKALITE_SPARK_ONLINE=1.
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Iterator

import pytest


@dataclass
class SparkEnv:
    session: Any = None
    skip_reason: str | None = None
    connector_reason: str | None = None


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
    env = SparkEnv()
    plan = None
    try:
        # Offline unless asked: a resolution attempt against unreachable remote repositories
        # costs a JVM start and Ivy's timeouts before it fails.
        plan = plan_connector(offline=os.environ.get("KAFKALITE_SPARK_ONLINE") != "1")
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
