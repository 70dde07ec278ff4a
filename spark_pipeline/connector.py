# Where Spark's Kafka connector comes from.
#
# The connector (spark-sql-kafka-0-10) is not in the pyspark wheel. Its coordinate is derived
# from the Spark that pyspark will launch (Scala and Spark versions read from the spark-core jar
# name), never hard-coded, because a connector built for another Spark fails at run time. Order
# of preference:
#   1. jar paths: --jars or KAFKALITE_SPARK_JARS (comma-separated files or directories);
#   2. --ivy-settings FILE: spark.jars.packages resolved with the user's own Ivy settings;
#   3. the local Maven repository (~/.m2/repository) when it holds the connector and every
#      dependency its poms name: an Ivy settings file with only that repository is generated
#      into a temporary directory, so resolution never touches the network;
#   4. otherwise spark.jars.packages with Spark's default resolvers (Maven Central), unless
#      --offline, which stops here with the list of what ~/.m2 lacks. Maven Central is probed
#      first (one TCP connect): when it cannot be reached, Spark would start only to print
#      ~70 lines of Ivy failures before the same verdict.
# Failures become ConnectorError, whose text says what is missing and the ways to provide it.
from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

JARS_ENV = "KAFKALITE_SPARK_JARS"
# Spark's own modules are on its classpath already; Spark's Ivy resolution excludes them too.
_ON_SPARKS_CLASSPATH = ("org.apache.spark:spark-core_", "org.apache.spark:spark-sql_",
                            "org.apache.spark:spark-catalyst_", "org.apache.spark:spark-tags_",
                            "org.apache.spark:spark-unsafe_", "org.apache.spark:spark-network-",
                            "org.apache.spark:spark-launcher_", "org.apache.spark:spark-common-")
_SKIPPED_SCOPES = {"test", "provided", "system", "import"}
_MAX_POMS = 200
MAVEN_CENTRAL = ("repo1.maven.org", 443)
_JAVA_OPTION_VARS = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")


class SparkUnavailable(RuntimeError):
    """Spark cannot run here (no pyspark, no suitable Java, ...); str() says why."""


class ConnectorError(SparkUnavailable):
    """The Kafka connector cannot be put on Spark's classpath; str() says why and what to do."""


@dataclass
class SparkInstall:
    spark_version: str
    scala_version: str
    jars_dir: Path

    @property
    def connector(self) -> str:
        return f"org.apache.spark:spark-sql-kafka-0-10_{self.scala_version}:{self.spark_version}"

    def required_jar_prefixes(self) -> list[str]:
        s = self.scala_version
        return [f"spark-sql-kafka-0-10_{s}-", f"spark-token-provider-kafka-0-10_{s}-",
                "kafka-clients-", "commons-pool2-"]


@dataclass
class ConnectorPlan:
    """Spark settings that bring in the connector, and how they were chosen."""
    conf: dict[str, str]
    how: str
    install: SparkInstall
    m2_missing: list[str] = field(default_factory=list)
    temp_dir: str | None = None

    def cleanup(self) -> None:
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


def spark_install() -> SparkInstall:
    """The Spark that pyspark launches: $SPARK_HOME if set, else the one inside the wheel."""
    try:
        import pyspark
    except ImportError as exc:
        raise SparkUnavailable("pyspark is not installed: pip install 'pyspark==4.0.0' (the "
                               "project's `spark` extra)") from exc
    homes = [os.environ.get("SPARK_HOME"), str(Path(pyspark.__file__).parent)]
    for home in filter(None, homes):
        jars = Path(home) / "jars"
        for jar in sorted(jars.glob("spark-core_*.jar")):
            m = re.fullmatch(r"spark-core_(\d+\.\d+)-(.+)\.jar", jar.name)
            if m:
                return SparkInstall(m.group(2), m.group(1), jars)
    raise ConnectorError(f"cannot tell the Spark and Scala versions: no spark-core_*.jar under "
                         f"{' or '.join(str(Path(h) / 'jars') for h in homes if h)}")


def default_m2() -> Path:
    return Path.home() / ".m2" / "repository"


def unreachable(remote: tuple[str, int], timeout_s: float = 3.0) -> str | None:
    """Why `remote` (host, port) cannot be reached, or None when it answers or when the JVM is
    told to use a proxy (which a direct connect would not go through)."""
    if any("proxyHost" in os.environ.get(v, "") for v in _JAVA_OPTION_VARS):
        return None
    try:
        socket.create_connection(remote, timeout=timeout_s).close()
        return None
    except OSError as exc:
        return f"{remote[0]}:{remote[1]} cannot be reached from here ({exc})"


def plan_connector(jars: str | None = None, ivy_settings: str | None = None,
                   offline: bool = False, m2: Path | None = None,
                   install: SparkInstall | None = None,
                   remote: tuple[str, int] = MAVEN_CENTRAL) -> ConnectorPlan:
    """Choose how Spark gets the connector; raises ConnectorError when it cannot."""
    install = install or spark_install()
    jars = jars if jars is not None else os.environ.get(JARS_ENV) or None
    if jars:
        paths = _expand_jars(jars, install)
        return ConnectorPlan({"spark.jars": ",".join(paths)}, f"jar paths ({len(paths)} jars)",
                             install)
    packages = {"spark.jars.packages": install.connector}
    if ivy_settings:
        if not os.path.isfile(ivy_settings):
            raise ConnectorError(explain(install, [f"the Ivy settings file {ivy_settings}"]))
        return ConnectorPlan({**packages, "spark.jars.ivySettings": os.path.abspath(ivy_settings)},
                             f"{install.connector} via Ivy settings {ivy_settings}", install)
    m2 = m2 or default_m2()
    missing = m2_missing(install.connector, m2)
    if not missing:
        tmp = tempfile.mkdtemp(prefix="kafkalite-ivy-")
        settings = write_offline_ivy_settings(Path(tmp), m2)
        return ConnectorPlan({**packages, "spark.jars.ivySettings": str(settings),
                              "spark.jars.ivy": str(Path(tmp) / "home")},
                             f"{install.connector} from {m2} (offline)", install, temp_dir=tmp)
    if offline:
        raise ConnectorError(explain(install, missing, m2))
    problem = unreachable(remote)
    if problem:
        raise ConnectorError(explain(install, missing, m2, remote_problem=problem))
    return ConnectorPlan(packages, f"{install.connector} from remote repositories", install,
                         m2_missing=missing)


def _expand_jars(spec: str, install: SparkInstall) -> list[str]:
    paths: list[str] = []
    absent: list[str] = []
    for item in filter(None, (s.strip() for s in re.split(f"[,{re.escape(os.pathsep)}]", spec))):
        p = Path(item).expanduser()
        if p.is_dir():
            paths += sorted(str(j) for j in p.glob("*.jar"))
        elif p.is_file():
            paths.append(str(p))
        else:
            absent.append(f"{p} (named in --jars/{JARS_ENV}, does not exist)")
    names = [Path(p).name for p in paths]
    for prefix in install.required_jar_prefixes():
        if not any(n.startswith(prefix) for n in names):
            version = install.spark_version if prefix.startswith("spark-") else "<version>"
            absent.append(f"{prefix}{version}.jar (not among the jars given)")
    if absent:
        raise ConnectorError(explain(install, absent))
    return paths


def write_offline_ivy_settings(directory: Path, m2: Path) -> Path:
    """Ivy settings whose only resolver is the local Maven repository `m2`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ivysettings.xml"
    path.write_text(
        '<ivysettings>\n'
        '  <settings defaultResolver="local-m2"/>\n'
        f'  <caches defaultCacheDir="{directory / "cache"}"/>\n'
        '  <resolvers>\n'
        f'    <ibiblio name="local-m2" m2compatible="true" usepoms="true" '
        f'root="{m2.resolve().as_uri()}"/>\n'
        '  </resolvers>\n'
        '</ivysettings>\n', encoding="utf-8")
    return path


def _artifact_paths(m2: Path, group: str, artifact: str, version: str) -> tuple[Path, Path]:
    base = m2.joinpath(*group.split("."), artifact, version)
    return base / f"{artifact}-{version}.pom", base / f"{artifact}-{version}.jar"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(el: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in el if _local(c.tag) == name), None)


def _text(el: ET.Element | None, name: str) -> str | None:
    c = _child(el, name) if el is not None else None
    return c.text.strip() if c is not None and c.text else None


def _pom_chain(m2: Path, group: str, artifact: str, version: str) -> list[ET.Element]:
    """The pom and the parents that are present locally, child first."""
    chain: list[ET.Element] = []
    coord: tuple[str, str, str] | None = (group, artifact, version)
    while coord and len(chain) < 10:
        pom, _ = _artifact_paths(m2, *coord)
        try:
            root = ET.parse(pom).getroot()
        except (OSError, ET.ParseError):
            break
        chain.append(root)
        parent = _child(root, "parent")
        coord = None
        if parent is not None:
            g, a, v = (_text(parent, n) for n in ("groupId", "artifactId", "version"))
            coord = (g, a, v) if g and a and v else None
    return chain


def _properties(chain: list[ET.Element], version: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for root in reversed(chain):  # a child's properties override its parent's
        p = _child(root, "properties")
        for c in p if p is not None else []:
            props[_local(c.tag)] = (c.text or "").strip()
    props["project.version"] = props["version"] = version
    return props


def _substitute(value: str | None, props: dict[str, str]) -> str | None:
    for _ in range(5):
        if value is None or "${" not in value:
            return value
        value = re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m.group(1), m.group(0)), value)
    return value


def _dependencies(m2: Path, group: str, artifact: str, version: str) -> list[str]:
    """Runtime dependencies (g:a:v) named by a locally present pom, as Ivy would follow them."""
    chain = _pom_chain(m2, group, artifact, version)
    if not chain:
        return []
    props = _properties(chain, version)
    managed: dict[str, str] = {}
    for root in reversed(chain):
        dm = _child(root, "dependencyManagement")
        deps = _child(dm, "dependencies") if dm is not None else None
        for d in deps if deps is not None else []:
            managed[f"{_text(d, 'groupId')}:{_text(d, 'artifactId')}"] = _text(d, "version") or ""
    deps = _child(chain[0], "dependencies")
    found: list[str] = []
    for d in deps if deps is not None else []:
        scope = _substitute(_text(d, "scope"), props) or "compile"
        if scope in _SKIPPED_SCOPES or (_text(d, "optional") or "").lower() == "true":
            continue
        g = _substitute(_text(d, "groupId"), props)
        a = _substitute(_text(d, "artifactId"), props)
        v = _substitute(_text(d, "version") or managed.get(f"{g}:{a}"), props)
        if not (g and a and v) or "${" in g + a + v:
            continue  # a version only a full Maven build could work out: leave it to Ivy
        coord = f"{g}:{a}:{v}"
        if not coord.startswith(_ON_SPARKS_CLASSPATH):
            found.append(coord)
    return found


def m2_missing(coordinate: str, m2: Path) -> list[str]:
    """Files a resolution of `coordinate` from `m2` would need but that are absent."""
    missing: list[str] = []
    seen: set[str] = set()
    todo = [coordinate]
    while todo and len(seen) < _MAX_POMS:
        coord = todo.pop()
        if coord in seen:
            continue
        seen.add(coord)
        group, artifact, version = coord.split(":")
        pom, jar = _artifact_paths(m2, group, artifact, version)
        absent = [str(p) for p in (pom, jar) if not p.is_file()]
        missing += absent
        if not absent:
            todo += _dependencies(m2, group, artifact, version)
    return missing


def explain(install: SparkInstall, missing: list[str], m2: Path | None = None,
            remote_problem: str | None = None) -> str:
    """The message shown when the connector cannot be found: what is missing, how to fix it.
    With `remote_problem` (remote resolution was tried, or cannot work) the first suggestions
    are the local ones; otherwise (--offline) fetching it is the first."""
    s = install.scala_version
    v = install.spark_version
    fetch = ["internet access to Maven Central: run without --offline and Spark downloads it",
             "(spark.jars.packages);"]
    if remote_problem:
        fetch = [f"fetching it from Maven Central, which failed: {remote_problem};",
                 "with a proxy, give the JVM -Dhttps.proxyHost=... in JAVA_TOOL_OPTIONS;"]
    local = [f"a local Maven repository: install the artifacts into {m2 or default_m2()}",
             "(see scripts/install-spark-connector.md); it is then used without network access;",
             f"jar paths: --jars or {JARS_ENV}=a.jar,b.jar,... (files or directories) with",
             f"spark-sql-kafka-0-10_{s}-{v}.jar, spark-token-provider-kafka-0-10_{s}-{v}.jar,",
             "kafka-clients-<version>.jar and commons-pool2-<version>.jar;",
             "--ivy-settings FILE naming your own repository (spark.jars.ivySettings);"]
    ways = [local[:2], local[2:5], local[5:]]
    ways = ways + [fetch] if remote_problem else [fetch] + ways
    lines = [
        "Spark's Kafka connector is not available, so format(\"kafka\") cannot work.",
        f"Needed: {install.connector} (matching Spark {v}, Scala {s}) and its dependencies.",
        "Missing:",
        *(f"  - {m}" for m in missing),
        "Provide it in one of these ways:",
    ]
    for n, way in enumerate(ways, 1):
        lines += [f"  {n}. {way[0]}", *(f"     {line}" for line in way[1:])]
    return "\n".join(lines)[:-1] + "."
