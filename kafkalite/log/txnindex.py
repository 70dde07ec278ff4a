# Kafka's aborted-transaction index: `<base offset>.txnindex` beside a segment, one entry per
# transaction whose ABORT marker is in that segment, in marker order (TransactionIndex):
#
#   version int16 = 0 | producer_id int64 | first_offset int64 | last_offset int64 (the
#   marker's offset) | last_stable_offset int64 (the LSO once that transaction ended)
#
# The file exists only once a segment holds an abort, so a log that never sees transactions
# never opens one. Entries are read from disk at most once per segment (a read_committed
# Fetch consults them on every request). Entries are rebuilt from the log by the producer
# state's replay (coordinator/producer_state.py) when the tail of the log is replayed.
from __future__ import annotations

import os
import struct
from typing import NamedTuple

_ENTRY = struct.Struct(">hqqqq")
VERSION = 0
SUFFIX = ".txnindex"


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexCorrupt(ValueError):
    pass


class TxnIndex:
    def __init__(self, path: str):
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read at first use
        self._exists: bool | None = None

    @property
    def exists(self) -> bool:
        if self._exists is None:
            self._exists = os.path.exists(self.path)
        return self._exists

    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = _read(self.path) if self.exists else []
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        """Add one entry (an ABORT marker just appended). Raises OSError."""
        entries = self.entries()
        if entries and txn.last_offset <= entries[-1].last_offset:
            # Already there (a replay over a tail whose entries survived) or stale.
            if txn in entries:
                return
            raise ValueError(f"{self.path}: entry for offset {txn.last_offset} is not past "
                             f"the last one ({entries[-1].last_offset})")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(VERSION, *txn))
        finally:
            os.close(fd)
        self._exists = True
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the search
        is complete (an entry whose LSO reaches the bound: later segments cannot add any), as
        Kafka's collectAbortedTxns."""
        out = []
        for t in self.entries():
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound:
                out.append(t)
            if t.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or past `offset` (the log was truncated there)."""
        if not self.exists:
            return
        entries = self.entries()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        with open(self.path, "r+b") as f:
            f.truncate(len(keep) * _ENTRY.size)
        self._entries = keep

    def sync_handle(self) -> int | None:
        """A descriptor to fsync (the caller closes it), or None with no file."""
        if not self.exists:
            return None
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None

    def forget(self) -> None:
        """The file was deleted or renamed with its segment."""
        self._entries = []
        self._exists = False


def _read(path: str) -> list[AbortedTxn]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    usable = len(data) - len(data) % _ENTRY.size  # a torn last entry is dropped
    out = []
    for version, *fields in _ENTRY.iter_unpack(memoryview(data)[:usable]):
        if version != VERSION:
            raise TxnIndexCorrupt(f"{path}: unknown entry version {version}")
        out.append(AbortedTxn(*fields))
    return out
