# The plain Java client (kafka-clients 3.8, Apache Kafka's own) against kafkalite: compiles
# java/KafkaliteCheck.java with javac into a temporary directory and runs it against the session
# broker. The classpath is the Kafka anchor's libs/ (tests/helpers/real_kafka.anchor_dir():
# KAFKA_ANCHOR_DIR, else ../shared/anchors/kafka-3.8.0 from the repository root, else
# /work/shared/anchors/kafka-3.8.0): kafka-clients with the jars it loads at run time (slf4j
# with Kafka's own reload4j binding, configured by the anchor's tools-log4j.properties to log
# warnings to stderr; lz4, snappy, zstd). KAFKALITE_JAVA_CLASSPATH (jars separated by
# os.pathsep) replaces it. Skips with the reason when java/javac or the jars are not there.
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.real_kafka import anchor_dir

from ._checks import TIMEOUT_S, run_check

SOURCE = Path(__file__).parent / "java" / "KafkaliteCheck.java"
CLIENTS_SOURCE = Path(__file__).parent / "java" / "ClientsCheck.java"
# What kafka-clients needs at run time, as prefixes of the jar names in the anchor's libs/.
RUNTIME_JARS = ("kafka-clients-", "slf4j-api-", "slf4j-reload4j-", "reload4j-", "lz4-java-",
                "snappy-java-", "zstd-jni-")


def discover_classpath() -> tuple[list[str], list[str], str]:
    """(jars, extra JVM options, "") to compile and run with, or ([], [], why not)."""
    override = os.environ.get("KAFKALITE_JAVA_CLASSPATH")
    if override:
        return override.split(os.pathsep), [], ""
    anchor = anchor_dir()
    if anchor is None:
        return [], [], ("no Kafka anchor for kafka-clients: set KAFKA_ANCHOR_DIR, provide "
                        "../shared/anchors/kafka-3.8.0 or set KAFKALITE_JAVA_CLASSPATH")
    libs = Path(anchor) / "libs"
    jars = []
    for prefix in RUNTIME_JARS:
        found = sorted(j for j in libs.glob(f"{prefix}*.jar")
                       if re.fullmatch(rf"{re.escape(prefix)}\d[\w.\-]*\.jar", j.name))
        if not found:
            return [], [], f"{prefix}<version>.jar not found in {libs}"
        jars.append(str(found[-1]))
    log4j = Path(anchor) / "config" / "tools-log4j.properties"
    return jars, [f"-Dlog4j.configuration={log4j.as_uri()}"], ""


def compile_check(source: Path, out: Path) -> list[str]:
    """javac `source` into `out`; the command prefix that runs its class (skips when there is
    no JDK or no kafka-clients)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed; the Java client check needs a JDK (17+)")
    jars, jvm_options, why = discover_classpath()
    if not jars:
        pytest.skip(why)
    classpath = os.pathsep.join(jars)
    try:
        built = subprocess.run(["javac", "-d", str(out), "-cp", classpath, str(source)],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"javac did not finish in {TIMEOUT_S} s")
    assert built.returncode == 0, f"javac failed:\n{built.stdout}\n{built.stderr}"
    return ["java", *jvm_options, "-cp", os.pathsep.join([str(out), classpath]), source.stem]


@pytest.fixture(scope="module")
def java_clients(tmp_path_factory) -> list[str]:
    """java/ClientsCheck.java compiled: the command prefix that runs it."""
    return compile_check(CLIENTS_SOURCE, tmp_path_factory.mktemp("java-clients"))


def run_clients_check(java: list[str], prefix: str, props: dict[str, str], what: str) -> None:
    """ClientsCheck's produce/group-consume round trip with these client properties (and the
    wrong-password refusal when they hold a sasl.jaas.config)."""
    run_check([*java, prefix, *(f"{k}={v}" for k, v in props.items())],
              "JAVA CLIENTS CHECK PASSED", what)


@pytest.mark.parametrize("assignor", ["default", "cooperative-sticky"])
def test_java_client_end_to_end(kafka_broker: str, tmp_path: Path, assignor: str) -> None:
    java = compile_check(SOURCE, tmp_path)
    run_check([*java, kafka_broker, assignor], "ALL JAVA CHECKS PASSED",
              f"Java client check ({' '.join(java[:-1])})")
