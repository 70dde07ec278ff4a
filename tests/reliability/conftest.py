# Reliability harnesses (benchmarks/reliability/) in bounded CI form. Tests marked `long`
# run the long versions and are skipped unless KAFKALITE_LONG=1.
from __future__ import annotations

import os

import pytest

LONG = os.environ.get("KAFKALITE_LONG") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long: long-running reliability test (KAFKALITE_LONG=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if LONG:
        return
    skip = pytest.mark.skip(reason="long reliability run: set KAFKALITE_LONG=1")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)
