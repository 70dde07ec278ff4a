# Replacing a small state file atomically (topic metadata, checkpoints, producer snapshots):
# write a temporary file beside it, then rename over it, so a crash leaves the old or the new
# file, never a torn one.
from __future__ import annotations

import os
import uuid


def atomic_write(path: str, data: bytes, durable: bool = True) -> None:
    """With `durable`, the file and its directory entry are fsynced before returning."""
    # A short temporary name: `<topic>.json.tmp` would pass the 255-byte file-name limit for
    # topic names near Kafka's 249-character maximum.
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
