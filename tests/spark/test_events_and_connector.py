# The parts of spark_pipeline that need neither Spark nor a broker: the event generator, the
# reference model of append-mode watermark semantics, connector planning over a real directory
# tree laid out like a Maven repository, and the command-line parsing.
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spark_pipeline.connector import (ConnectorError, SparkInstall, m2_missing, plan_connector)
from spark_pipeline.events import ClickstreamGenerator, expected_page_stats
from spark_pipeline.generate import parse_args as generate_args
from spark_pipeline.job import parse_args as job_args, trigger_kwargs

MIN = 60_000
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z, a window boundary


def test_generator_is_deterministic_and_keyed_by_user():
    a = list(ClickstreamGenerator(seed=5, rate=10, start_ms=T0, bad_ratio=0.05).records(500))
    b = list(ClickstreamGenerator(seed=5, rate=10, start_ms=T0, bad_ratio=0.05).records(500))
    c = list(ClickstreamGenerator(seed=6, rate=10, start_ms=T0, bad_ratio=0.05).records(500))
    assert [(r.key, r.value, r.timestamp_ms) for r in a] == \
        [(r.key, r.value, r.timestamp_ms) for r in b]
    assert [r.value for r in a] != [r.value for r in c]
    good = [r for r in a if r.event is not None]
    assert 0 < len(a) - len(good) < 60
    for r in good:
        assert json.loads(r.value) == r.event
        assert r.key == r.event["user_id"].encode()
        assert r.timestamp_ms == r.event["event_time"]
        assert set(r.event) == {"event_id", "user_id", "session_id", "page", "url", "action",
                                "referrer", "user_agent", "event_time"}
    assert {r.event["action"] for r in good} == {"view", "search", "click", "purchase"}
    assert len({r.event["event_id"] for r in good}) == len(good)


def test_generator_time_advances_at_rate_with_some_late_events():
    recs = list(ClickstreamGenerator(seed=9, rate=4, start_ms=T0, late_ratio=0.05).records(400))
    on_time = [r for r in recs if not r.late]
    late = [r for r in recs if r.late]
    assert on_time[0].timestamp_ms == T0 or recs[0].late
    assert all(r.timestamp_ms == T0 + i * 250 for i, r in enumerate(recs) if not r.late)
    assert 5 <= len(late) <= 40
    for i, r in enumerate(recs):
        if r.late:
            assert 20_000 <= T0 + i * 250 - r.timestamp_ms <= 240_000


def ev(minute: float, page: str = "/a", user: str = "u1", action: str = "view") -> dict:
    return {"event_time": T0 + int(minute * MIN), "page": page, "user_id": user,
            "action": action}


def test_model_emits_windows_once_the_watermark_passes_their_end():
    r = expected_page_stats([[ev(0.5), ev(1.5, user="u2"), ev(3.5, action="purchase")], []])
    # after batch 0 the watermark is 3:30 - 2:00 = 1:30: window [0,1) is done, [1,2) is not
    assert r.watermarks == [0, T0 + int(1.5 * MIN)]
    assert list(r.emitted) == [(T0, "/a")]
    assert r.emitted[(T0, "/a")]["views"] == 1
    assert set(r.open_windows) == {(T0 + MIN, "/a"), (T0 + 3 * MIN, "/a")}
    assert r.open_windows[(T0 + 3 * MIN, "/a")]["purchases"] == 1


def test_model_drops_rows_late_against_the_previous_batch_watermark():
    r = expected_page_stats([[ev(5)], [ev(6), ev(2.5)], [ev(1.5), ev(4.2), ev(9)], []])
    # batch 1 filters with batch 0's watermark (0): 2:30 is kept, and emitted with [2,3)
    assert r.emitted[(T0 + 2 * MIN, "/a")]["events"] == 1
    # batch 2 filters with batch 1's watermark (3:00): 1:30 dropped, 4:12 kept
    assert [e["event_time"] for e in r.dropped] == [T0 + int(1.5 * MIN)]
    assert r.emitted[(T0 + 4 * MIN, "/a")]["events"] == 1
    assert (T0 + MIN, "/a") not in r.emitted
    assert list(r.open_windows) == [(T0 + 9 * MIN, "/a")]


def maven_artifact(m2: Path, g: str, a: str, v: str, deps: list[str] = ()) -> None:
    base = m2.joinpath(*g.split("."), a, v)
    base.mkdir(parents=True)
    (base / f"{a}-{v}.jar").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    dep_xml = "".join(
        f"<dependency><groupId>{d.split(':')[0]}</groupId><artifactId>{d.split(':')[1]}"
        f"</artifactId><version>{d.split(':')[2]}</version>"
        + ("<scope>test</scope>" if d.endswith(":9.9") else "") + "</dependency>"
        for d in deps)
    (base / f"{a}-{v}.pom").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        f"<dependencies>{dep_xml}</dependencies></project>")


INSTALL = SparkInstall("4.0.0", "2.13", Path("/nonexistent"))
SQL_KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"


def test_offline_plan_uses_only_the_local_maven_repository(tmp_path):
    m2 = tmp_path / "m2"
    with pytest.raises(ConnectorError) as err:
        plan_connector(jars="", offline=True, m2=m2, install=INSTALL)
    msg = str(err.value)
    assert SQL_KAFKA in msg and "spark-sql-kafka-0-10_2.13-4.0.0.jar" in msg
    assert "--jars" in msg and "KAFKALITE_SPARK_JARS" in msg and "internet" in msg

    maven_artifact(m2, "org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.0.0",
                   ["org.apache.kafka:kafka-clients:3.9.0",
                    "org.apache.commons:commons-pool2:2.12.0", "junit:junit:9.9"])
    maven_artifact(m2, "org.apache.commons", "commons-pool2", "2.12.0")
    missing = m2_missing(SQL_KAFKA, m2)
    assert [Path(p).name for p in missing] == ["kafka-clients-3.9.0.pom", "kafka-clients-3.9.0.jar"]
    with pytest.raises(ConnectorError, match="kafka-clients-3.9.0.jar"):
        plan_connector(jars="", offline=True, m2=m2, install=INSTALL)
    with socket.socket() as central:  # stands in for a reachable Maven Central
        central.bind(("127.0.0.1", 0))
        central.listen()
        online = plan_connector(jars="", offline=False, m2=m2, install=INSTALL,
                                remote=central.getsockname())
    assert online.conf == {"spark.jars.packages": SQL_KAFKA}

    maven_artifact(m2, "org.apache.kafka", "kafka-clients", "3.9.0")
    plan = plan_connector(jars="", offline=True, m2=m2, install=INSTALL)
    try:
        assert plan.conf["spark.jars.packages"] == SQL_KAFKA
        settings = Path(plan.conf["spark.jars.ivySettings"]).read_text()
        assert m2.resolve().as_uri() in settings and "http" not in settings.replace(
            "http://maven.apache.org", "")
    finally:
        plan.cleanup()
    assert not Path(plan.conf["spark.jars.ivySettings"]).exists()


def test_jar_paths_must_name_every_connector_jar(tmp_path, monkeypatch):
    for name in ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "kafka-clients-3.9.0.jar"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setenv("KAFKALITE_SPARK_JARS", str(tmp_path))
    with pytest.raises(ConnectorError) as err:
        plan_connector(install=INSTALL, m2=tmp_path / "none")
    assert "spark-token-provider-kafka-0-10_2.13-4.0.0.jar" in str(err.value)
    assert "commons-pool2-<version>.jar" in str(err.value)
    for name in ("spark-token-provider-kafka-0-10_2.13-4.0.0.jar", "commons-pool2-2.12.0.jar"):
        (tmp_path / name).write_bytes(b"")
    plan = plan_connector(install=INSTALL, m2=tmp_path / "none")
    assert len(plan.conf["spark.jars"].split(",")) == 4
    with pytest.raises(ConnectorError, match="does not exist"):
        plan_connector(jars=f"{tmp_path / 'nope.jar'},{tmp_path}", install=INSTALL)


def test_command_lines():
    a = generate_args(["--bootstrap", "127.0.0.1:1", "--rate", "5", "--duration", "2",
                       "--seed", "3"])
    assert (a.topic, a.rate, a.duration, a.seed, a.speedup) == ("clickstream", 5, 2, 3, 1.0)
    with pytest.raises(SystemExit):
        generate_args(["--bootstrap", "x:1", "--rate", "0"])
    j = job_args(["--bootstrap", "x:1", "--checkpoint", "/tmp/c", "--trigger",
                  "processing-time=10s", "--max-offsets-per-trigger", "100"])
    assert (j.input_topic, j.output_topic, j.dlq_topic, j.starting_offsets) == \
        ("clickstream", "page_stats", "clickstream_dlq", "earliest")
    assert trigger_kwargs(j.trigger) == {"processingTime": "10 seconds"}
    assert trigger_kwargs("available-now") == {"availableNow": True}
    assert trigger_kwargs("processing-time=500ms") == {"processingTime": "500 milliseconds"}
    with pytest.raises(SystemExit):
        job_args(["--bootstrap", "x:1", "--checkpoint", "c", "--trigger", "once"])


def test_job_refuses_an_unreachable_bootstrap_before_starting_spark():
    import socket

    from spark_pipeline.job import unreachable

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert unreachable(f"127.0.0.1:{port}") is None
        # one good server in the list is enough, as for a Kafka client's bootstrap list
        assert unreachable(f"127.0.0.1:1,127.0.0.1:{port}") is None
    msg = unreachable(f"127.0.0.1:{port}")
    assert msg and msg.startswith("no broker reachable") and f"127.0.0.1:{port}" in msg


def test_demo_table_shows_top_pages_and_the_best_seller_per_window():
    from spark_pipeline.demo import top_pages_table

    def row(page, views, buys=0):
        return {"window_start": "2024-01-01T10:00:00Z", "window_end": "2024-01-01T10:01:00Z",
                "page": page, "views": views, "events": views, "unique_users": 1, "clicks": 0,
                "purchases": buys, "conversion_rate": buys / views}

    table = top_pages_table([row("/", 10), row("/cart", 8), row("/product/p001", 4, 1),
                             row("/search", 6)], top=2).splitlines()
    assert table[2].startswith("10:00-10:01") and "/ " in table[2]
    assert "/cart" in table[3] and "28 events" in table[3]
    assert "/product/p001" in table[4] and "25.0%" in table[4] and "1 purchases" in table[4]
    assert len(table) == 5


def test_java_check_names_what_is_missing(tmp_path, monkeypatch):
    from spark_pipeline.session import java_problem

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "scripts/setup-java.sh" in java_problem()
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    (fake / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert java_problem().startswith("Java 11 found")
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "17.0.15" 2025-04-15\' >&2\n')
    assert java_problem() is None


def test_ivy_settings_of_ones_own_are_passed_to_spark(tmp_path):
    with pytest.raises(ConnectorError, match="the Ivy settings file"):
        plan_connector(jars="", ivy_settings=str(tmp_path / "none.xml"), install=INSTALL)
    mine = tmp_path / "ivysettings.xml"
    mine.write_text("<ivysettings/>")
    plan = plan_connector(jars="", ivy_settings=str(mine), install=INSTALL, m2=tmp_path)
    assert plan.conf == {"spark.jars.packages": SQL_KAFKA, "spark.jars.ivySettings": str(mine)}


def closed_port() -> tuple[str, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()


def test_unreachable_maven_central_stops_before_spark_with_local_ways_first(tmp_path,
                                                                           monkeypatch):
    for var in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConnectorError) as err:
        plan_connector(jars="", m2=tmp_path / "m2", install=INSTALL, remote=closed_port())
    msg = str(err.value)
    assert "without --offline" not in msg  # the user did run without it
    ways = [line for line in msg.splitlines() if line.startswith("  1. ")]
    assert ways == [f"  1. a local Maven repository: install the artifacts into {tmp_path / 'm2'}"]
    assert "cannot be reached from here" in msg and "spark-sql-kafka-0-10_2.13-4.0.0.jar" in msg


def test_demo_without_pyspark_says_how_to_install_it_in_one_line():
    root = Path(__file__).resolve().parents[2]
    code = ("import sys, runpy; sys.modules['pyspark'] = None; "  # an import of it fails
            "runpy.run_module('spark_pipeline.demo', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.splitlines() == [
        "demo: pyspark is not installed: pip install 'pyspark==4.0.0' (the project's `spark` "
        "extra)"]
