# The storage layer's own exceptions. log/ knows nothing of the wire protocol; the broker's
# handlers map these to Kafka's error codes (broker/handlers/_storage.py).
from __future__ import annotations


class LogError(Exception):
    """A request the log cannot carry out."""


class StorageError(OSError, LogError):
    """An I/O failure (disk full, I/O error, a directory gone): Kafka's KAFKA_STORAGE_ERROR.
    An OSError too, so callers that treat any failed write alike (the offsets store) still
    catch it."""


class OffsetOutOfRange(LogError):
    """An offset outside [log start offset, log end offset]."""


def storage_error(e: OSError, what: str) -> StorageError:
    """`e` as a StorageError that says what failed, keeping its errno."""
    if isinstance(e, StorageError):
        return e
    return StorageError(e.errno, f"{what}: {e.strerror or e}")


class UnexpectedAppendOffset(LogError):
    """A replicated append with a batch below the log end offset or below the batch before
    it (gaps are accepted): Kafka's UnexpectedAppendOffsetException."""


class CorruptRecord(LogError):
    """A replicated batch that fails its framing or CRC check: CORRUPT_MESSAGE."""
