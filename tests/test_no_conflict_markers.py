# Merge-conflict markers left in a tracked text file (a resolved merge once committed
# COMPATIBILITY.md with three of them): fail before they reach main.
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(rb"^(<<<<<<< |>>>>>>> |=======$)", re.M)


def test_no_tracked_file_holds_conflict_markers():
    try:
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                               check=True, timeout=30).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout: {e}")
    bad = []
    for name in files:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ""} \
                or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" not in data[:4096] and MARKER.search(data):
            bad.append(name)
    assert not bad, f"conflict markers in {bad}"
