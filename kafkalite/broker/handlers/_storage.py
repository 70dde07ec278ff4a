# The storage layer's exceptions (log/errors.py) as Kafka's error codes. Not an API key.
from __future__ import annotations

import logging

from ...log.errors import LogError, OffsetOutOfRange, StorageError
from ...wire.errors import ErrorCode

log = logging.getLogger("kafkalite.broker")

__all__ = ["LogError", "log_error_code"]


def log_error_code(e: LogError, where: str = "") -> ErrorCode:
    """Kafka's code for `e`; an I/O failure is logged too (the client sees only the code),
    and answered KAFKA_STORAGE_ERROR, as Kafka answers for a partition on a failed disk."""
    if isinstance(e, OffsetOutOfRange):
        return ErrorCode.offset_out_of_range
    if isinstance(e, StorageError):
        log.error("Storage error%s: %s", f" on {where}" if where else "", e)
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error
