# Shared fixtures. `kafka_broker` and `kafka_topic` come from kafkalite.testing (the pytest
# plugin users get too); `broker_process` is a private broker for tests that restart it;
# `real_kafka` is a real Apache Kafka for differential tests and `any_broker` runs a test
# against both (tests/helpers/real_kafka.py); `zookeeper` is a ZooKeeper server shared by the
# session (tests/helpers/zookeeper.py).
from __future__ import annotations

from typing import Iterator

import pytest

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import any_broker, real_kafka  # noqa: F401  (fixtures)
from tests.helpers import zookeeper as zk_helper


@pytest.fixture
def broker_process(tmp_path):
    """A function-scoped broker (start/stop/kill/restart) with its own data directory."""
    bp = BrokerProcess(data_dir=str(tmp_path / "data"))
    bp.start()
    try:
        yield bp
    finally:
        bp.cleanup()


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[str]:
    """"127.0.0.1:PORT" of a ZooKeeper server shared by the session; each test takes its own
    chroot with tests.helpers.zookeeper.chroot_connect. Skips with the reason when no
    ZooKeeper can run here (scripts/setup-zookeeper.sh installs one)."""
    reason = zk_helper.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = zk_helper.ZooKeeperProcess()
    try:
        server.start()
        yield server.connect
    finally:
        server.cleanup()
