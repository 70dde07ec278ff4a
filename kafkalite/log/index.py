# Sparse offset and time indexes of one segment, as Kafka lays them out on disk.
#
# .index: 8-byte entries (relative offset u32, byte position u32), one per
# log.index.interval.bytes of appended data. .timeindex: 12-byte entries (timestamp i64,
# relative offset u32), added alongside an offset entry when the batch's max timestamp
# grows. Kafka preallocates and mmaps these files; here they are append-only files mirrored
# by in-memory arrays (loaded lazily for inactive segments), searched with bisect.
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right

from . import reads
from .errors import StorageError

_OFF = struct.Struct(">II")
_TIME = struct.Struct(">qI")


class IndexCorrupt(Exception):
    pass


class _IndexFile:
    entry: struct.Struct

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self._fd: int | None = None
        self._loaded = False
        self._keys = array("q")
        self._values = array("q")

    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _write_entry(self, entry: bytes) -> None:
        """Append one entry, or none at all: a failed or short write (disk full) is cut back
        so the file stays a whole number of entries, then re-raised."""
        fd = self._open_fd()
        try:
            written = os.write(fd, entry)
        except OSError:
            written = -1
        if written != len(entry):
            try:
                os.ftruncate(fd, len(self._keys) * self.entry.size)
            except OSError:
                pass  # a torn entry is caught by the size check on the next load
            raise StorageError(28, f"could not append to {self.path}")

    def create(self) -> None:
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))

    @property
    def loaded(self) -> bool:
        return self._loaded

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    def load(self, nowait: bool = False) -> None:
        """Read the file into memory; IndexCorrupt if it is not a valid index. With
        `nowait`, reads.WouldBlock when the file is not in the page cache."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            data: bytes | bytearray = b""
        else:
            try:
                data = reads.pread(fd, os.fstat(fd).st_size, 0, nowait)
            finally:
                os.close(fd)
        self._keys = array("q")
        self._values = array("q")
        size = self.entry.size
        if len(data) % size:
            raise IndexCorrupt(f"{self.path}: size {len(data)} is not a multiple of {size}")
        for a, b in self.entry.iter_unpack(data):
            self._append_mem(a, b)
        self._loaded = True
        self._check()

    def _append_mem(self, a: int, b: int) -> None:
        raise NotImplementedError

    def _check(self) -> None:
        k = self._keys
        for i in range(1, len(k)):
            if k[i] < k[i - 1]:
                raise IndexCorrupt(f"{self.path}: entries out of order at {i}")

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._keys)

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self.close()
        with open(self.path, "wb"):
            pass
        self._keys = array("q")
        self._values = array("q")
        self._loaded = True

    def truncate_entries(self, n: int) -> None:
        """Keep the first n entries."""
        self._ensure_loaded()
        del self._keys[n:]
        del self._values[n:]
        self.close()
        os.truncate(self.path, n * self.entry.size)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def dup_fd(self) -> int | None:
        """A duplicate of the write descriptor (None before the first append), for an fsync
        in another thread that must not race with close()."""
        return None if self._fd is None else os.dup(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def unload(self) -> None:
        """Drop the in-memory copy of an inactive segment's index."""
        self.close()
        self._keys = array("q")
        self._values = array("q")
        self._loaded = False


class OffsetIndex(_IndexFile):
    entry = _OFF

    def _append_mem(self, rel: int, pos: int) -> None:
        self._keys.append(self.base_offset + rel)
        self._values.append(pos)

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        if self._keys and offset <= self._keys[-1]:
            return
        self._write_entry(_OFF.pack(offset - self.base_offset, position))
        self._keys.append(offset)
        self._values.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`, or (base, 0)."""
        self._ensure_loaded()
        i = bisect_right(self._keys, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._keys[i], self._values[i]

    def first(self) -> tuple[int, int]:
        self._ensure_loaded()
        if not self._keys:
            return self.base_offset, 0
        return self._keys[0], self._values[0]

    def last(self) -> tuple[int, int]:
        self._ensure_loaded()
        if not self._keys:
            return self.base_offset, 0
        return self._keys[-1], self._values[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position` (after the log was truncated there)."""
        self._ensure_loaded()
        n = bisect_right(self._values, position - 1)
        if n < len(self._values):
            self.truncate_entries(n)

    def check_against(self, log_size: int) -> None:
        self._ensure_loaded()
        v = self._values
        for i in range(len(v)):
            if v[i] >= log_size or (i and v[i] <= v[i - 1]):
                raise IndexCorrupt(f"{self.path}: entry {i} points at {v[i]}, log is {log_size}")


class TimeIndex(_IndexFile):
    entry = _TIME

    def _append_mem(self, ts: int, rel: int) -> None:
        self._keys.append(ts)
        self._values.append(self.base_offset + rel)

    def append(self, timestamp: int, offset: int) -> None:
        self._ensure_loaded()
        if self._keys and timestamp <= self._keys[-1]:
            return
        self._write_entry(_TIME.pack(timestamp, offset - self.base_offset))
        self._keys.append(timestamp)
        self._values.append(offset)

    def lookup(self, timestamp: int) -> int:
        """Offset to start scanning from: the last entry with timestamp < `timestamp`."""
        self._ensure_loaded()
        i = bisect_right(self._keys, timestamp - 1) - 1
        if i < 0:
            return self.base_offset
        return self._values[i]

    def max_entry(self) -> tuple[int, int] | None:
        self._ensure_loaded()
        if not self._keys:
            return None
        return self._keys[-1], self._values[-1]

    def check_against(self, base_offset: int, next_offset: int) -> None:
        self._ensure_loaded()
        v = self._values
        if v and (v[0] < base_offset or v[-1] >= next_offset):
            raise IndexCorrupt(f"{self.path}: offsets {v[0]}..{v[-1]} outside "
                               f"[{base_offset}, {next_offset})")
        for i in range(1, len(v)):
            if v[i] < v[i - 1]:
                raise IndexCorrupt(f"{self.path}: offsets out of order at entry {i}")

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at offsets >= `offset`."""
        self._ensure_loaded()
        n = len(self._values)
        while n and self._values[n - 1] >= offset:
            n -= 1
        if n < len(self._values):
            self.truncate_entries(n)
