# The `docker` marker: tests that build and run the container image. Deselect them with
# `-m "not docker"` on a machine where a first image build (minutes) is unwanted.
from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "docker: builds and runs the container image (docker or buildah)")
