# Data-directory fixtures for the tests of what a broker may touch: a snapshot of a tree's
# bytes, the user files a data directory must never lose, and a bounded wait for a removal
# done in the background.
from __future__ import annotations

import os
import time
from pathlib import Path


def tree(root: Path | str) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for d, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(d, name), root)] = None
        for name in files:
            with open(os.path.join(d, name), "rb") as f:
                out[os.path.relpath(os.path.join(d, name), root)] = f.read()
    return out


def user_files(root: Path) -> None:
    """What a mount root or a home directory holds: lost+found, a folder, a file."""
    os.makedirs(root / "lost+found")
    os.makedirs(root / "photos")
    (root / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (root / "notes.txt").write_text("do not delete")


def wait_gone(path: Path | str, seconds: float = 10.0) -> bool:
    """True once `path` no longer exists; a bound for a hung removal, not a timing check."""
    deadline = time.monotonic() + seconds
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not os.path.exists(path)
