# Producer-state snapshot files, in Kafka's own format (ProducerStateManager, version 1), so
# that Kafka's tools (`kafka-dump-log.sh --files 00000000000000001234.snapshot`) read them:
#
#   version int16 = 1 | crc uint32 (CRC32C of everything after it) | int32 count, then per
#   producer: producer_id int64 | epoch int16 | last_sequence int32 | last_offset int64 |
#   offset_delta int32 | timestamp int64 | coordinator_epoch int32 (-1 before any marker) |
#   current_txn_first_offset int64 (first offset of its ongoing transaction, -1 for none:
#   with it, the LSO is right after a restart although that offset precedes the snapshot)
#
# A file is named by the offset its state is complete up to (exclusive), 20 digits, in the
# partition directory: the new segment's base offset at a roll, the log end at shutdown.
# Writes go to `<name>.tmp` first and are renamed into place, so a reader sees a whole file
# or none; a torn or foreign file fails its CRC and is skipped (the state is then rebuilt
# from an older snapshot and more of the log). SnapshotWriter does the disk work of rolls on
# one background thread: the files only shorten the replay at start, so a lost one costs time,
# never correctness, and the event loop never waits for them.
from __future__ import annotations

import logging
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable

import crc32c

log = logging.getLogger("kafkalite.producers")

VERSION = 1
SUFFIX = ".snapshot"
TMP_SUFFIX = SUFFIX + ".tmp"
LEGACY = "producer.snapshot"  # JSON state of kafkalite 0.1.0; read once, then removed
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
# (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
#  coordinator_epoch, current_txn_first_offset)
Entry = tuple[int, int, int, int, int, int, int, int]


class CorruptSnapshot(ValueError):
    pass


def file_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def encode(entries: Iterable[Entry]) -> bytes:
    pack = _ENTRY.pack
    body = [pack(*e) for e in entries]
    out = bytearray(_HEAD.pack(VERSION, 0, len(body)))
    out += b"".join(body)
    struct.pack_into(">I", out, 2, crc32c.crc32c(memoryview(out)[6:]))
    return bytes(out)


def decode(data: bytes) -> list[Entry]:
    if len(data) < _HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes is shorter than the header")
    version, crc, count = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if crc32c.crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshot("CRC mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshot(f"{len(data)} bytes do not hold {count} entries")
    return list(_ENTRY.iter_unpack(memoryview(data)[_HEAD.size:]))


def list_offsets(directory: str, remove_unfinished: bool = False) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending. `remove_unfinished` (at start,
    when no write can be under way) deletes the temporary files of interrupted writes."""
    out = []
    for name in os.listdir(directory):
        if name.endswith(SUFFIX) and name[:-len(SUFFIX)].isdigit():
            out.append(int(name[:-len(SUFFIX)]))
        elif remove_unfinished and name.endswith(TMP_SUFFIX):
            _unlink(os.path.join(directory, name))
    return sorted(out)


def read(directory: str, offset: int) -> list[Entry]:
    with open(os.path.join(directory, file_name(offset)), "rb") as f:
        return decode(f.read())


def write(directory: str | int, offset: int, data: bytes, durable: bool) -> None:
    """Write one snapshot; `directory` is a path or an open directory descriptor (a write
    queued before a topic deletion then lands in the deleted directory, never in a new
    topic's directory of the same name)."""
    dir_fd = directory if isinstance(directory, int) else None
    base = "" if dir_fd is not None else str(directory)
    name = os.path.join(base, file_name(offset))
    fd = os.open(name + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(name + ".tmp", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    # A snapshot supersedes the JSON state file of older kafkalite versions.
    _unlink(os.path.join(base, LEGACY), dir_fd)


def delete(directory: str | int, offsets: Iterable[int]) -> None:
    dir_fd = directory if isinstance(directory, int) else None
    base = "" if dir_fd is not None else str(directory)
    for offset in offsets:
        _unlink(os.path.join(base, file_name(offset)), dir_fd)


def _unlink(path: str, dir_fd: int | None = None) -> None:
    try:
        os.unlink(path, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


class SnapshotWriter:
    """Writes and deletes snapshot files on one background thread, in submission order."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="producer-snapshots")

    def submit(self, directory: str, offset: int | None, data: Callable[[], bytes],
               obsolete: Iterable[int] = ()) -> Future | None:
        """Write `data()` as the snapshot at `offset` (None: write nothing), then delete the
        `obsolete` snapshots. The directory is opened now, on the caller's thread."""
        try:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            log.warning("Producer snapshot in %s skipped: %s", directory, e)
            return None
        return self._pool.submit(_job, dir_fd, directory, offset, data, list(obsolete))

    def drain(self) -> None:
        """Wait for every job queued so far."""
        self._pool.submit(lambda: None).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _job(dir_fd: int, directory: str, offset: int | None, data: Callable[[], bytes],
         obsolete: list[int]) -> None:
    try:
        if offset is not None:
            write(dir_fd, offset, data(), durable=True)
        delete(dir_fd, obsolete)
    except OSError as e:
        log.warning("Producer snapshot %s in %s failed: %s", offset, directory, e)
    finally:
        os.close(dir_fd)
