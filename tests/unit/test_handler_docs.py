# What the documentation says each API serves must be what the registry (and so the
# ApiVersions answer) says: each handler module's opening line and COMPATIBILITY.md's tables.
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kafkalite.broker import handlers  # noqa: F401  (registers every handler)
from kafkalite.broker.registry import HANDLERS

ROOT = Path(__file__).resolve().parents[2]
HEAD = re.compile(r"^# (\w+) \(key (\d+)\), v(\d+)(?:-(\d+))?")
ROW = re.compile(r"^\| (\w+) \((\d+)\) \| (\d+)(?:-(\d+))?")


def _range(lo: str, hi: str | None) -> tuple[int, int]:
    return int(lo), int(hi if hi is not None else lo)


@pytest.mark.parametrize("key", sorted(HANDLERS))
def test_handler_header_states_registered_versions(key):
    h = HANDLERS[key]
    path = Path(sys.modules[h.fn.__module__].__file__)
    first = path.read_text().splitlines()[0]
    m = HEAD.match(first)
    assert m, f"{path.name} must open with '# {h.name} (key {key}), vA-B': {first!r}"
    assert (m[1], int(m[2])) == (h.name, key)
    assert _range(m[3], m[4]) == (h.min_version, h.max_version), path.name


def test_compatibility_md_lists_every_api_with_registered_versions():
    rows = {}
    for line in (ROOT / "COMPATIBILITY.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            rows[int(m[2])] = (m[1], _range(m[3], m[4]))
    registered = {k: (h.name, (h.min_version, h.max_version)) for k, h in HANDLERS.items()}
    assert rows == registered
