# Request decoding and generic response encoding through kio, loaded lazily per
# (api_key, version): importing every schema costs ~0.7 s, and a broker that answers its
# first Metadata request fast must not pay that up front.
from __future__ import annotations

import io
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from .errors import MalformedRequest
from .guard import check_body


@cache
def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@cache
def _reader(cls: type):
    return entity_reader(cls)


@cache
def _writer(cls: type):
    return entity_writer(cls)


@cache
def is_flexible(api_key: int, version: int) -> bool:
    """Whether the request (and so its header v2 / response header v1) is flexible."""
    return bool(request_class(api_key, version).__flexible__)


def decode_request(api_key: int, version: int, frame: bytes, pos: int) -> Any:
    """Decode the request body starting at `pos`; MalformedRequest on any decoding error."""
    cls = request_class(api_key, version)
    check_body(cls, frame, pos)
    try:
        entity, size = _reader(cls)(frame, pos)
    except Exception as e:  # kio raises a variety of errors for bad input
        raise MalformedRequest(f"cannot decode {cls.__name__} v{version}: {e}") from None
    if pos + size > len(frame):
        raise MalformedRequest(f"{cls.__name__} v{version}: body runs past the frame")
    # Bytes after the body are ignored, as Kafka's parser does: confluent-kafka 2.16 sends
    # its all-topics Metadata v12 request with trailing bytes.
    return entity


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(entity))(buf, entity)
    return buf.getvalue()
