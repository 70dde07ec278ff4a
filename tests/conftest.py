# Shared fixtures. `kafka_broker` and `kafka_topic` come from kafkalite.testing (the pytest
# plugin users get too); `broker_process` is a private broker for tests that restart it.
from __future__ import annotations

import pytest

from kafkalite.testing import BrokerProcess


@pytest.fixture
def broker_process(tmp_path):
    """A function-scoped broker (start/stop/kill/restart) with its own data directory."""
    bp = BrokerProcess(data_dir=str(tmp_path / "data"))
    bp.start()
    try:
        yield bp
    finally:
        bp.cleanup()
