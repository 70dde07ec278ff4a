# Kafka's own command-line tools (../shared/anchors/kafka-3.8.0/bin) run against kafkalite and
# against the real Kafka 3.8.0; their outputs are compared after `normalise` (addresses, ids,
# timings). Each tool start costs a JVM (~1-2 s), so the tests share topics per broker and
# the session prints the time spent in tools.
from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Iterator

import pytest

from tests.helpers.real_kafka import (anchor_dir, create_topic, private_kafka,
                                      unavailable_reason)

TOOL_SECONDS: list[float] = []
# Kafka's base64 topic ids / cluster ids; they may start or end with '-', where \b fails
UUID_RE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])")


def run_tool(tool: str, *args: str, stdin: str | None = None, timeout: float = 90) -> str:
    """Run bin/<tool> and return stdout+stderr; fails on a non-zero exit."""
    anchor = anchor_dir()
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "KAFKA_JMX_OPTS": "-Dkafka.jmx.remote=off",
           "LOG_DIR": os.environ.get("TMPDIR", "/tmp")}
    env.pop("JMX_PORT", None)
    start = time.monotonic()
    p = subprocess.run([os.path.join(anchor, "bin", tool), *args], input=stdin, env=env,
                       capture_output=True, text=True, timeout=timeout)
    TOOL_SECONDS.append(time.monotonic() - start)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{tool} {' '.join(args)} exited {p.returncode}:\n{out[-3000:]}"
    return out


# Until kafkalite serves DescribeTopicPartitions (75), the admin client logs that it falls
# back to Metadata; the fallback's answers are compared, the notice is dropped.
FALLBACK_RE = re.compile(r"\[[0-9-]+ [0-9:,]+\] WARN \[AdminClient[^\]]*\] The "
                         r"DescribeTopicPartitions API is not supported[^\n]*KafkaAdminClient\)")


def normalise(text: str, bootstrap: str) -> str:
    """Addresses, ids and member names masked; the DescribeTopicPartitions fallback notice
    dropped."""
    text = FALLBACK_RE.sub("", text)
    host, port = bootstrap.rsplit(":", 1)
    text = text.replace(bootstrap, "<bootstrap>").replace(f"{host}:{port}", "<bootstrap>")
    text = re.sub(rf"\b{port}\b", "<port>", text)
    text = UUID_RE.sub("<id>", text)
    text = re.sub(r"(consumer|console-consumer|perf)-[\w-]+-[0-9a-f-]{36}", r"\1-<member>", text)
    text = re.sub(r"/127\.0\.0\.1", "/<host>", text)
    # The real Kafka is shared with compat_tests/diff in one session: lines naming its
    # topics, groups and users ("diff-...") are not these tests' business.
    return "\n".join(line.rstrip() for line in text.splitlines()
                     if not line.startswith(("SLF4J", "WARNING:")) and "diff-" not in line).strip()


@pytest.fixture(scope="session")
def both() -> Iterator[dict[str, str]]:
    """{"kafkalite": bootstrap, "kafka": bootstrap}, each with the topic tools-data (2
    partitions) that the tests fill through the console producer. Both brokers are the
    tools' own: listings must not show what other suites created."""
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    from kafkalite.testing import BrokerProcess
    with private_kafka() as kafka, BrokerProcess() as lite:
        brokers = {"kafkalite": lite.bootstrap, "kafka": kafka}
        for b in brokers.values():
            create_topic(b, "tools-data", {"retention.ms": "86400000"}, partitions=2)
        yield brokers


def pytest_terminal_summary(terminalreporter) -> None:
    if TOOL_SECONDS:
        terminalreporter.write_line(
            f"kafka tools: {len(TOOL_SECONDS)} runs, {sum(TOOL_SECONDS):.1f} s in total, "
            f"{max(TOOL_SECONDS):.1f} s the longest")
