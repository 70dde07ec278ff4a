# One log segment: `<base offset, 20 digits>.log` with its sparse `.index` and `.timeindex`,
# and a `.txnindex` (txnindex.py) once it holds an aborted transaction's marker.
#
# Batches are appended exactly as received, except for the 16-byte offset prefix, with one
# writev per batch (no copy of the batch body). Reads are preads of a byte range; the batch
# holding a wanted offset is found by the sparse index plus a scan of 12-byte batch prefixes.
from __future__ import annotations

import logging
import os
import struct

from ..wire.records import (HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, crc_ok,
                            parse_header)
from . import reads
from .errors import StorageError
from .index import IndexCorrupt, OffsetIndex, TimeIndex
from .txnindex import SUFFIX as TXN_SUFFIX, TxnIndex

log = logging.getLogger("kafkalite.log")

_PREFIX = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
_FIND_WINDOW = 16384
DELETED_SUFFIX = ".deleted"

__all__ = ["Segment", "StorageError", "segment_name", "DELETED_SUFFIX"]


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    def __init__(self, directory: str, base_offset: int, index_interval: int,
                 suffix: str = ""):
        """`suffix` names a segment the cleaner is writing (`.cleaned`, then `.swap`)."""
        self.directory = directory
        self.base_offset = base_offset
        stem = os.path.join(directory, segment_name(base_offset))
        self.path = stem + ".log" + suffix
        self.index = OffsetIndex(stem + ".index" + suffix, base_offset)
        self.time_index = TimeIndex(stem + ".timeindex" + suffix, base_offset)
        self.txn_index = TxnIndex(stem + TXN_SUFFIX + suffix)
        self.index_interval = index_interval
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        try:
            self.size = os.fstat(self.fd).st_size
            if self.size == 0:  # a new segment: its (empty) indexes exist from the start
                self.index.create()
                self.time_index.create()
        except OSError:
            os.close(self.fd)
            raise
        self.created_at_ms: int | None = None
        self._bytes_since_index = 0

    # --- opening and recovery -------------------------------------------------------------

    def load(self, recover: bool) -> int:
        """Open an existing segment. With `recover`, check every batch's CRC and truncate at
        the first bad one, rebuilding the indexes. Otherwise trust the indexes once they pass
        cheap sanity checks (present, sorted, in bounds, last entry on a batch boundary) and
        scan only past the last index entry; if anything there looks wrong, fall back to a
        full CRC-checked rebuild rather than truncate on the word of a bad index.
        Returns the number of bytes truncated."""
        if not recover:
            try:
                self._load_indexes()
                _, start_pos = self.index.last()
                end = self._scan(start_pos, check_crc=False, rebuild=False)
                if end == self.size:
                    self.time_index.check_against(self.base_offset, self.next_offset)
                    return 0
                raise IndexCorrupt(f"{self.path}: invalid batch at byte {end} past the index")
            except IndexCorrupt as e:
                log.warning("Rebuilding indexes of %s: %s", self.path, e)
                recover = True
        self.index.reset()
        self.time_index.reset()
        self._reset_state()
        end = self._scan(0, check_crc=recover, rebuild=True)
        truncated = self.size - end
        if truncated:
            os.ftruncate(self.fd, end)
            self.size = end
            self.index.truncate_to_position(end)
            self.time_index.truncate_to_offset(self.next_offset)
            self.txn_index.truncate_to(self.next_offset)
        return truncated

    def _load_indexes(self) -> None:
        if not self.size:
            return
        for idx in (self.index, self.time_index):
            if not os.path.exists(idx.path):
                raise IndexCorrupt(f"{idx.path} is missing")
        self.index.load()
        self.time_index.load()
        self.index.check_against(self.size)
        for offset, pos in (self.index.first(), self.index.last()):
            h = parse_header(os.pread(self.fd, HEADER_SIZE, pos)) \
                if pos + HEADER_SIZE <= self.size else None
            if h is None or h.base_offset != offset or h.magic != 2 \
                    or pos + LOG_OVERHEAD + h.batch_length > self.size:
                raise IndexCorrupt(f"{self.index.path}: entry for offset {offset} does not "
                                   f"point at its batch (byte {pos})")
        te = self.time_index.max_entry()
        if te is not None:
            self.max_timestamp, self.offset_of_max_timestamp = te

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None

    def _scan(self, position: int, check_crc: bool, rebuild: bool) -> int:
        """Walk batch headers from `position` to the end of the file, noting each batch;
        returns the position of the first invalid batch (the file size if none)."""
        size = self.size
        pos = position
        self._bytes_since_index = 0
        if position > 0:
            self.first_batch_timestamp = parse_header(
                os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        while pos < size:
            if size - pos < HEADER_SIZE:
                break
            head = os.pread(self.fd, HEADER_SIZE, pos)
            h = parse_header(head)
            batch_size = LOG_OVERHEAD + h.batch_length
            if h.magic != 2 or h.batch_length < MIN_BATCH_LENGTH or pos + batch_size > size \
                    or h.base_offset < self.next_offset and pos != position \
                    or h.base_offset < self.base_offset:
                break
            if check_crc and not crc_ok(os.pread(self.fd, batch_size, pos), 0, batch_size):
                break
            self._note_batch(h.base_offset, h.base_offset + h.last_offset_delta,
                             h.max_timestamp, pos, batch_size, rebuild)
            pos += batch_size
        return pos

    def _note_batch(self, base: int, last: int, max_ts: int, pos: int, size: int,
                    index: bool) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last
        if index and (self._bytes_since_index >= self.index_interval or pos == 0):
            try:
                self.index.append(base, pos)
                # As Kafka: the time index records the running maximum at each index point,
                # so a large timestamp between index points is never lost on reopen.
                if self.max_timestamp >= 0:
                    self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
            except OSError as e:
                # The batch is in the log already: it must count (a sparse index may skip
                # an entry; lookups use the one before). Not counting it would hand its
                # offsets out again.
                log.warning("Index entry for offset %d of %s not written: %s", base,
                            self.path, e)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.next_offset = last + 1

    def seal_time_index(self) -> None:
        """Record the segment's final maximum timestamp (on roll and clean close)."""
        if self.size and self.max_timestamp >= 0 and self.time_index.loaded:
            try:
                self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
            except OSError as e:
                # The time index is sparse: without its last entry, lookups and retention
                # see an earlier maximum until the segment is rebuilt. Not worth failing
                # the roll or the shutdown over.
                log.warning("Final time index entry of %s not written: %s", self.path, e)

    # --- appends --------------------------------------------------------------------------

    def append(self, prefix: bytes, body: memoryview | bytes, base_offset: int,
               last_offset: int, max_timestamp: int) -> None:
        pos = self.size
        total = len(prefix) + len(body)
        try:
            written = os.writev(self.fd, [prefix, body])
        except OSError as e:
            self._undo(pos)
            raise StorageError(e.errno, f"append to {self.path} failed: {e.strerror}") from e
        if written != total:
            self._undo(pos)
            raise StorageError(28, f"short write to {self.path} ({written} of {total} bytes)")
        self.size = pos + total
        self._note_batch(base_offset, last_offset, max_timestamp, pos, total, True)

    def _undo(self, pos: int) -> None:
        try:
            os.ftruncate(self.fd, pos)
        except OSError:
            pass

    # --- reads ----------------------------------------------------------------------------

    def find(self, offset: int, nowait: bool = False) -> tuple[int, int] | None:
        """(position, size) of the batch holding `offset` or the first after it. With
        `nowait`, reads.WouldBlock instead of waiting for the disk."""
        if nowait and not self.index.loaded:
            self.index.load(nowait=True)
        entry, pos = self.index.lookup(offset)
        size = self.size
        window = b""
        window_at = pos
        while pos + LOG_OVERHEAD <= size:
            rel = pos - window_at
            if rel < 0 or rel + 27 > len(window):
                # One read covers the short scan from an index entry (batch headers spaced
                # at most ~index.interval.bytes apart), instead of a pread per header.
                window = reads.pread(self.fd, min(_FIND_WINDOW, size - pos), pos, nowait)
                window_at, rel = pos, 0
                if len(window) < 27:
                    return None
            base, length = _PREFIX.unpack_from(window, rel)
            if entry >= 0:
                if base != entry and pos:
                    # Every entry names the base offset of the batch it points at; one that
                    # does not is damaged: scan from the segment start instead.
                    log.warning("%s: entry for offset %d points at byte %d, not a batch "
                                "boundary; scanning from the start", self.index.path,
                                entry, pos)
                    pos = 0
                    continue
                entry = -1
            last = base + _LAST_DELTA.unpack_from(window, rel + 23)[0]
            if last >= offset:
                return pos, LOG_OVERHEAD + length
            pos += LOG_OVERHEAD + length
        return None

    def read(self, position: int, length: int, nowait: bool = False) -> bytes | bytearray:
        """Up to `length` bytes at `position` (fewer at the end of the segment)."""
        return reads.pread(self.fd, max(min(length, self.size - position), 0), position,
                           nowait)

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    # --- lifecycle ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch ending at or after `offset`, with its index entries; the
        segment's end offset and timestamps are those of what remains (the headers past the
        last index entry are scanned again, as at a reopen). Raises OSError."""
        found = self.find(offset)
        if found is None:
            return
        pos = found[0]
        base = _PREFIX.unpack(os.pread(self.fd, _PREFIX.size, pos))[0]  # `offset`'s batch
        os.ftruncate(self.fd, pos)
        self.size = pos
        self.index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(base)
        self.txn_index.truncate_to(base)
        self._reset_state()
        te = self.time_index.max_entry()
        if te is not None:
            self.max_timestamp, self.offset_of_max_timestamp = te
        self._scan(self.index.last()[1] if pos else 0, check_crc=False, rebuild=False)

    def flush(self) -> None:
        os.fsync(self.fd)
        self.index.flush()
        self.time_index.flush()

    def sync_handles(self) -> list[int]:
        """Duplicated descriptors of this segment's files: an fsync on them in a worker
        thread stays valid while the event loop rolls, closes or deletes the segment."""
        fds = [os.dup(self.fd)]
        try:
            for idx in (self.index, self.time_index):
                fd = idx.dup_fd()
                if fd is not None:
                    fds.append(fd)
            fd = self.txn_index.sync_handle()
            if fd is not None:
                fds.append(fd)
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def deactivate(self) -> None:
        """The segment rolled: no more appends, so index memory and fds can go."""
        self.seal_time_index()
        self.index.unload()
        self.time_index.unload()

    def retire(self) -> list[int]:
        """Deactivate the segment after a roll; returns duplicated descriptors of its files
        (the caller fsyncs and closes them), taken after the last index write."""
        self.seal_time_index()
        fds = self.sync_handles()
        self.deactivate()
        return fds

    def close(self) -> None:
        if self.fd >= 0:
            self.seal_time_index()
        self.index.close()
        self.time_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for p in (self.path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self.txn_index.forget()

    def rename(self, suffix: str) -> list[str]:
        """Give the segment's files the suffix `suffix` ("" for the live names), keeping them
        open (the cleaner's swap; readers holding this object keep working). The log file
        goes first: recovery takes a live `.log` beside `.swap` indexes as half renamed.
        Returns the new base names."""
        stem = os.path.join(self.directory, segment_name(self.base_offset))
        names = []
        for obj, ext in ((self, ".log"), (self.index, ".index"), (self.time_index, ".timeindex"),
                         (self.txn_index, TXN_SUFFIX)):
            new = stem + ext + suffix
            try:
                os.rename(obj.path, new)
                names.append(os.path.basename(new))
            except FileNotFoundError:
                pass
            obj.path = new
        return names

    def detach(self) -> list[str]:
        """Close the segment and rename its files to `*.deleted` (cheap: no data is freed),
        as Kafka does before deleting asynchronously; returns the new base names, for an
        unlink off the event loop. A leftover is removed at the next start."""
        self.close()
        names = []
        for p in (self.path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.rename(p, p + DELETED_SUFFIX)
                names.append(os.path.basename(p) + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        self.txn_index.forget()
        return names
