# The data directory's own files, as Kafka keeps them: the `.lock` held for the process's life,
# `meta.properties` (what makes a directory a broker's data directory), `partition.metadata`
# (which topic id a partition directory belongs to), and the names of directories kafkalite
# set aside (`*-delete`, `*-stray`). Small functions over the file system; no sockets.
from __future__ import annotations

import base64
import fcntl
import os
import re
import uuid

from ..config import ConfigError
from ..fileio import atomic_write

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
# A fresh file system's root holds lost+found; it is the file system's, never a user's data.
LOST_FOUND = "lost+found"
# Kafka's names for partition directories it set aside: `<topic>-<n>.<32 hex>-delete` (a
# deleted topic whose files are being removed) and `…-stray` (a partition of another topic id).
_SET_ASIDE = re.compile(r"^.+-\d+\.[0-9a-f]{32}-(delete|stray)$")


class DataDirError(OSError):
    """The data directory cannot be used: another process holds it, or it is not kafkalite's.
    An OSError, so that `kafkalite serve` reports it as one line and exits non-zero."""


class DirLock:
    """An exclusive flock on `<data dir>/.lock`, held until release() or the process's end
    (the kernel drops it with the descriptor, so a killed broker never leaves it held)."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, LOCK_FILE)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirError(
                f"Failed to acquire lock on file {LOCK_FILE} in {data_dir}. Another broker "
                "process is using this directory.") from None
        except OSError:
            os.close(fd)
            raise
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        # The file stays: unlinking it would let a process that opened the old inode and a
        # process that creates a new one both "hold" the lock.
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def refuse_foreign(data_dir: str) -> None:
    """Raise DataDirError when `data_dir` holds something but no meta.properties: a home
    directory, a mount root with files, someone else's folder. What counts as "something":
    any entry but hidden ones and lost+found. Hidden entries are where tools keep their
    state (ours: .lock, .kafkalite/; a repository's .gitkeep), lost+found is the file
    system's own, so a fresh volume mounted as the data directory is adopted. (Kafka 3.8 is
    stricter in another way: it starts in any formatted directory but stops at the first
    subdirectory that is not a partition, lost+found and hidden ones included.)"""
    if os.path.exists(os.path.join(data_dir, META_PROPERTIES)):
        return
    foreign = sorted(n for n in os.listdir(data_dir) if not n.startswith(".") and n != LOST_FOUND)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise DataDirError(
            f"{data_dir} is not a kafkalite data directory: it is not empty ({shown}) and "
            f"holds no {META_PROPERTIES}. Set log.dirs to a new or empty directory.")


def read_properties(path: str) -> dict[str, str]:
    props: dict[str, str] = {}
    try:
        with open(path) as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    props[k] = v
    except FileNotFoundError:
        pass
    return props


def load_meta_properties(data_dir: str, configured_cluster_id: str, node_id: int) -> str:
    """The cluster id stored in meta.properties (created with a new one if absent), checked
    against a configured cluster.id. Written (and fsynced) on the calling thread: it runs
    at start, before the listener is bound, when there is no connection to stall."""
    path = os.path.join(data_dir, META_PROPERTIES)
    props = read_properties(path)
    stored = props.get("cluster.id")
    if configured_cluster_id and stored and stored != configured_cluster_id:
        raise ConfigError(f"cluster.id {configured_cluster_id} does not match {stored} "
                          f"stored in {path}")
    cluster_id = stored or configured_cluster_id or uuid_b64(uuid.uuid4())
    props.update({"version": "1", "cluster.id": cluster_id, "node.id": str(node_id)})
    atomic_write(path, "".join(f"{k}={v}\n" for k, v in props.items()).encode())
    return cluster_id


def uuid_b64(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


_PM_HEAD = b"version: 0\ntopic_id: "


def write_partition_metadata(directory: str, topic_id: uuid.UUID) -> None:
    # Kafka's PartitionMetadataFile, byte for byte (no newline after the id). Not fsynced:
    # the topic's metadata file is the durable record, and a partition.metadata lost or torn
    # by a power failure is written again from it at the next start.
    atomic_write(os.path.join(directory, PARTITION_METADATA),
                 _PM_HEAD + uuid_b64(topic_id).encode(), durable=False)


def read_partition_metadata(directory: str) -> uuid.UUID | None:
    """The topic id in `directory`'s partition.metadata; None when the file is absent or
    unreadable (torn), so that the caller decides from what else it knows. Read once per
    partition at start: a raw read, no line parsing."""
    try:
        fd = os.open(os.path.join(directory, PARTITION_METADATA), os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 256)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not data.startswith(_PM_HEAD):
        return None
    raw = data[len(_PM_HEAD):].strip()
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4)))
    except ValueError:
        return None


def is_set_aside(name: str) -> str | None:
    """'delete' or 'stray' for a directory name kafkalite (or Kafka) set aside, else None."""
    m = _SET_ASIDE.match(name)
    return m.group(1) if m else None


def set_aside_name(directory: str, kind: str) -> str:
    return f"{directory}.{uuid.uuid4().hex}-{kind}"


def unlink_durably(path: str) -> None:
    """Remove `path` and fsync its directory, so that a power failure cannot bring it back."""
    os.unlink(path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
