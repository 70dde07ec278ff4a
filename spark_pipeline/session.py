# The SparkSession every entry point uses: local[2], everything bound to 127.0.0.1, no UI,
# 2 shuffle partitions (small data on a small machine), UTC session time zone (window bounds
# and the JSON written to Kafka do not depend on the machine's zone), and the Kafka connector
# chosen by connector.plan_connector().
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from .connector import (ConnectorError, ConnectorPlan, SparkUnavailable, explain,
                        plan_connector)

MIN_JAVA = 17

BASE_CONF = {
    "spark.master": "local[2]",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.metricsEnabled": "false",
}


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java, or older than 17), or None when it can."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return ("Java is not installed (no `java` on PATH and no JAVA_HOME); Spark 4 needs "
                f"Java {MIN_JAVA}+: run scripts/setup-java.sh")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{java} -version` failed: {exc}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return f"cannot read the Java version from `{java} -version`: {out.strip()[:200]}"
    major = int(m.group(2)) if m.group(1) == "1" else int(m.group(1))
    if major < MIN_JAVA:
        return f"Java {major} found at {java}; Spark 4 needs Java {MIN_JAVA}+"
    return None


def build_session(app_name: str = "kafkalite-spark", plan: ConnectorPlan | None = None,
                  conf: dict[str, str] | None = None, log_level: str = "WARN"):
    """Start (or return the running) SparkSession; ConnectorError if the connector fails,
    SparkUnavailable if Java is missing or too old."""
    problem = java_problem()
    if problem:
        raise SparkUnavailable(problem)
    from pyspark.sql import SparkSession

    # The JVM inherits these: no lookup of the machine's hostname, and Python workers (if any)
    # run in this interpreter, where pyspark is installed.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for key, value in {**BASE_CONF, **(plan.conf if plan else {}), **(conf or {})}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the launcher's own error text has been printed to stderr
        if plan is None or "JAVA_GATEWAY_EXITED" not in f"{type(exc).__name__} {exc}":
            raise
        what = [f"resolving {plan.how} failed (Spark's report is printed above)",
                *(f"{path} (not in the local Maven repository)" for path in plan.m2_missing)]
        remote = "Spark's resolution from remote repositories failed" if plan.m2_missing else None
        raise ConnectorError(explain(plan.install, what, remote_problem=remote)) from exc
    spark.sparkContext.setLogLevel(log_level)
    return spark


def session_with_connector(app_name: str, jars: str | None = None,
                           ivy_settings: str | None = None, offline: bool = False,
                           say=print):
    """(session, plan) with the Kafka connector, for the command-line entry points; the
    caller stops the session and cleans up the plan. Raises SparkUnavailable (or its
    subclass ConnectorError) with a message meant for the user."""
    plan = plan_connector(jars, ivy_settings, offline)
    say(f"Kafka connector: {plan.how}")
    try:
        return build_session(app_name, plan), plan
    except BaseException:
        plan.cleanup()
        raise
