# Kafka error codes (kio's generated ErrorCode enum) and the exceptions that carry them.
from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "MalformedRequest"]


class KafkaError(Exception):
    """An error answered to the client with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name.upper())
        self.code = code
        self.message = message


class MalformedRequest(Exception):
    """A frame that cannot be parsed: the connection is closed, as Kafka does."""
