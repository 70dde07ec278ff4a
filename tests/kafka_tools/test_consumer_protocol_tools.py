# kafka-consumer-groups.sh (Kafka 3.8.0) on a KIP-848 group: --list, --describe (offsets,
# --members, --state) and --delete, while a Java consumer with group.protocol=consumer keeps
# the group alive, on kafkalite and on the real Kafka 3.8 (group.coordinator.rebalance.
# protocols=classic,consumer); the outputs equal after conftest.normalise.
from __future__ import annotations

import contextlib
import subprocess
import time
from typing import Iterator

import pytest

from tests.clients_extra.test_java_consumer_protocol import java_check, serve  # noqa: F401
from tests.kafka_tools.conftest import normalise, run_tool

GROUP, TOPIC = "kip848-tools", "kip848-tools-data"


@contextlib.contextmanager
def holding(cmd: list[str], bootstrap: str) -> Iterator[subprocess.Popen]:
    """A Java consumer of GROUP, once it holds its partitions."""
    p = subprocess.Popen([*cmd, "hold", bootstrap, TOPIC, GROUP, "120"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and not line.startswith("ASSIGNED"):
            line = p.stdout.readline()  # type: ignore[union-attr]
            if not line and p.poll() is not None:
                break
        assert line.startswith("ASSIGNED 6"), f"the Java consumer got no partitions: {line!r}"
        yield p
        p.stdin.close()  # type: ignore[union-attr]  # the consumer leaves the group
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)


@pytest.fixture(scope="module")
def brokers() -> Iterator[dict[str, str]]:
    with serve("kafka") as kafka, serve("kafkalite") as lite:
        yield {"kafkalite": lite, "kafka": kafka}


def groups_tool(brokers: dict[str, str], *args: str) -> dict[str, str]:
    return {name: normalise(run_tool("kafka-consumer-groups.sh", "--bootstrap-server", b,
                                     *args), b)
            for name, b in brokers.items()}


def test_consumer_groups_tool_on_a_kip848_group(brokers, java_check) -> None:  # noqa: F811
    outs: dict[str, dict[str, str]] = {}
    with contextlib.ExitStack() as stack:
        for b in brokers.values():
            stack.enter_context(holding(java_check, b))
        for what in (["--list"], ["--describe", "--group", GROUP],
                     ["--describe", "--group", GROUP, "--members"],
                     ["--describe", "--group", GROUP, "--state"],
                     ["--delete", "--group", GROUP]):
            outs[" ".join(what)] = groups_tool(brokers, *what)
    assert "The group is not empty." in outs["--delete --group " + GROUP]["kafka"]
    # The consumers have left: the group is Empty and can be deleted.
    outs["--state after leaving"] = groups_tool(brokers, "--describe", "--group", GROUP,
                                                "--state")
    outs["--delete after leaving"] = groups_tool(brokers, "--delete", "--group", GROUP)
    outs["--list after deleting"] = groups_tool(brokers, "--list")
    assert "was successful" in outs["--delete after leaving"]["kafka"]
    for what, out in outs.items():
        assert out["kafkalite"] == out["kafka"], (what, out)
