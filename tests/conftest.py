# Shared fixtures. `kafka_broker` and `kafka_topic` come from kafkalite.testing (the pytest
# plugin users get too); `broker_process` is a private broker for tests that restart it;
# `real_kafka` is a real Apache Kafka for differential tests and `any_broker` runs a test
# against both (tests/helpers/real_kafka.py).
from __future__ import annotations

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import any_broker, real_kafka  # noqa: F401  (fixtures)


@pytest.fixture
def broker_process(tmp_path):
    """A function-scoped broker (start/stop/kill/restart) with its own data directory."""
    bp = BrokerProcess(data_dir=str(tmp_path / "data"))
    bp.start()
    try:
        yield bp
    finally:
        bp.cleanup()
