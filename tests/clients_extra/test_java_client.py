# The plain Java client (kafka-clients 3.9) against kafkalite: compiles java/KafkaliteCheck.java
# with javac into a temporary directory and runs it against the session broker. The classpath
# is discovered on this machine, never downloaded: kafka-clients from ~/.m2/repository, its
# dependencies (slf4j-api; lz4-java, snappy-java, zstd-jni) from ~/.m2 or the pyspark wheel's
# jars/ directory. KAFKALITE_JAVA_CLASSPATH overrides the discovery. Skips with the reason when
# java/javac or the jars are not there (a fresh machine has no populated ~/.m2).
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ._checks import TIMEOUT_S, run_check

SOURCE = Path(__file__).parent / "java" / "KafkaliteCheck.java"
M2 = Path(os.path.expanduser("~")) / ".m2" / "repository"
# artifact -> its folder under ~/.m2/repository
ARTIFACTS = {
    "kafka-clients": "org/apache/kafka/kafka-clients",
    "slf4j-api": "org/slf4j/slf4j-api",
    "slf4j-simple": "org/slf4j/slf4j-simple",
    "lz4-java": "org/lz4/lz4-java",
    "snappy-java": "org/xerial/snappy/snappy-java",
    "zstd-jni": "com/github/luben/zstd-jni",
}


def _version_key(version: str) -> tuple:
    return tuple(int(n) if n.isdigit() else n for n in re.split(r"[.\-]", version))


def _pyspark_jars() -> Path | None:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return jars if jars.is_dir() else None


def _found(artifact: str) -> dict[str, Path]:
    """version -> jar for every copy of `artifact` in ~/.m2 and pyspark's jars/."""
    out: dict[str, Path] = {}
    pattern = re.compile(rf"^{re.escape(artifact)}-(\d[\w.\-]*)\.jar$")
    place = M2 / ARTIFACTS[artifact]
    for jar in place.glob("*/*.jar") if place.is_dir() else ():
        m = pattern.match(jar.name)
        if m:
            out[m.group(1)] = jar
    jars = _pyspark_jars()
    for jar in jars.glob(f"{artifact}-*.jar") if jars else ():
        m = pattern.match(jar.name)
        if m:
            out.setdefault(m.group(1), jar)
    return out


def discover_classpath() -> tuple[list[str], str]:
    """The jars to compile and run with, or ([], why not)."""
    override = os.environ.get("KAFKALITE_JAVA_CLASSPATH")
    if override:
        return override.split(os.pathsep), ""
    clients = _found("kafka-clients")
    if "3.9.0" not in clients:
        return [], (f"kafka-clients-3.9.0.jar not found under {M2 / ARTIFACTS['kafka-clients']}"
                    f" (found versions: {sorted(clients) or 'none'})")
    apis, simples = _found("slf4j-api"), _found("slf4j-simple")
    if not apis:
        return [], "slf4j-api jar not found in ~/.m2 or the pyspark wheel's jars/"
    # A binding of the same version as the API, so warnings reach the test log; else no binding.
    paired = sorted(set(apis) & set(simples), key=_version_key)
    if paired:
        logging = [apis[paired[-1]], simples[paired[-1]]]
    else:
        logging = [apis[max(apis, key=_version_key)]]
    codecs = []
    for artifact in ("lz4-java", "snappy-java", "zstd-jni"):
        found = _found(artifact)
        if found:
            codecs.append(found[max(found, key=_version_key)])
    return [str(p) for p in [clients["3.9.0"], *logging, *codecs]], ""


@pytest.mark.parametrize("assignor", ["default", "cooperative-sticky"])
def test_java_client_end_to_end(kafka_broker: str, tmp_path: Path, assignor: str) -> None:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed; the Java client check needs a JDK (17+)")
    jars, why = discover_classpath()
    if not jars:
        pytest.skip(why)
    classpath = os.pathsep.join(jars)
    try:
        built = subprocess.run(["javac", "-d", str(tmp_path), "-cp", classpath, str(SOURCE)],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"javac did not finish in {TIMEOUT_S} s")
    assert built.returncode == 0, f"javac failed:\n{built.stdout}\n{built.stderr}"
    run_check(["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-cp", os.pathsep.join([str(tmp_path), classpath]), "KafkaliteCheck",
               kafka_broker, assignor],
              "ALL JAVA CHECKS PASSED", f"Java client check (classpath {jars})")
