# The Java client (kafka-clients 3.8) with group.protocol=consumer (KIP-848; it sends
# ConsumerGroupHeartbeat v0): java/ConsumerProtocolCheck.java, two consumers of one group
# share a 6-partition topic and consume every record exactly once. Run against kafkalite and
# against the real Kafka 3.8 with group.coordinator.rebalance.protocols=classic,consumer,
# which serves v0 to this client. Classpath and skips as test_java_client.py.
from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import private_kafka
from tests.integration.test_consumer_protocol import GROUP_SETTINGS, KAFKA_SETTINGS
from tests.integration.test_consumer_protocol_restart import low_port

from ._checks import run_check
from .test_java_client import compile_check

SOURCE = Path(__file__).parent / "java" / "ConsumerProtocolCheck.java"


@pytest.fixture(scope="module")
def java_check(tmp_path_factory) -> list[str]:
    """The command prefix that runs the compiled check."""
    return compile_check(SOURCE, tmp_path_factory.mktemp("java"))


@contextlib.contextmanager
def serve(kind: str) -> Iterator[str]:
    """kafkalite or the real Kafka 3.8, both with KIP-848 groups and the same timeouts."""
    if kind == "kafka":
        with private_kafka(KAFKA_SETTINGS) as bootstrap:
            yield bootstrap
    else:
        with BrokerProcess(port=low_port(), settings=GROUP_SETTINGS) as bp:
            yield bp.bootstrap


@pytest.fixture(scope="module", params=["kafkalite", "kafka"])
def kip848_broker(request) -> Iterator[str]:
    with serve(request.param) as bootstrap:
        yield bootstrap


def test_two_java_consumers_share_a_topic(kip848_broker: str, java_check: list[str]) -> None:
    suffix = uuid.uuid4().hex[:8]
    run_check([*java_check, "share", kip848_broker, f"jc-{suffix}", f"jg-{suffix}", "300"],
              "CONSUMER PROTOCOL CHECK PASSED",
              f"Java group.protocol=consumer check against {kip848_broker}")
