# Raw Kafka protocol over a blocking socket, encoded and decoded with kafka-python's
# `kafka.protocol` classes: a codec written independently of kafkalite's (which uses kio), so a
# shared misreading of the protocol guide is unlikely to hide a bug.
#
# kafka-python builds one class per message from Kafka's own JSON schemas
# (kafka/protocol/schemas/resources/*.json); `Request[v]` is the class at version v, and
# `with_header()` + `encode(header=True, framed=True)` gives the bytes on the wire, with the
# request header v1 or v2 chosen by the schema's flexibleVersions. Its schemas are those of
# Kafka 4.x: validVersions there start above 0 where Kafka 4.0 removed old versions (KIP-896),
# but every field still carries its original version range and kafka-python deliberately
# lowers the minimum to 0, so versions 3.x brokers still serve encode correctly.
from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka.protocol.api_message import ApiMessage

# Importing these packages registers every request/response class kafka-python has.
import kafka.protocol.admin  # noqa: F401
import kafka.protocol.consumer  # noqa: F401
import kafka.protocol.metadata  # noqa: F401
import kafka.protocol.producer  # noqa: F401

CLIENT_ID = "compat-tests"


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def _schemas() -> dict[int, dict[str, type]]:
    found: dict[int, dict[str, type]] = {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or getattr(cls, "_json", None) is None:
            continue
        found.setdefault(cls.API_KEY, {})[cls.type] = cls
    return {k: v for k, v in found.items() if "request" in v and "response" in v}


SCHEMAS = _schemas()


def request_class(api_key: int) -> type:
    return SCHEMAS[api_key]["request"]


def response_class(api_key: int) -> type:
    return SCHEMAS[api_key]["response"]


def has_schema(api_key: int, version: int) -> bool:
    """Whether kafka-python can encode and decode this (key, version)."""
    pair = SCHEMAS.get(api_key)
    return pair is not None and 0 <= version <= pair["request"].max_version \
        and version <= pair["response"].max_version


class ConnectionClosed(Exception):
    """The peer closed the connection before a whole response arrived."""


class Conn:
    """One TCP connection speaking framed Kafka requests; responses are read in order."""

    def __init__(self, bootstrap: str, timeout: float = 15.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._next_cid = 1
        self._pending: list[tuple[int, type, int]] = []  # (correlation id, response class, version)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, api_key: int, version: int, fields: dict[str, Any],
               correlation_id: int | None = None) -> tuple[bytes, int]:
        cid = self._next_cid if correlation_id is None else correlation_id
        self._next_cid = cid + 1
        req = build(api_key, version, fields)
        req.with_header(correlation_id=cid, client_id=CLIENT_ID)
        return req.encode(header=True, framed=True), cid

    def send(self, api_key: int, version: int, fields: dict[str, Any] | None = None,
             expect_response: bool = True) -> int:
        data, cid = self.encode(api_key, version, fields or {})
        self.sock.sendall(data)
        if expect_response:
            self._pending.append((cid, response_class(api_key), version))
        return cid

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        deadline = time.monotonic() + self.timeout
        while len(buf) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no complete response within {self.timeout}s")
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv(self) -> Any:
        """The next response, decoded; its correlation id must be the oldest one pending."""
        cid, resp_cls, version = self._pending.pop(0)
        frame = self.recv_frame()
        resp = resp_cls[version].decode(frame, header=True)
        got = resp.header.correlation_id
        if got != cid:
            raise AssertionError(f"correlation id {got} where {cid} was expected")
        return resp

    def call(self, api_key: int, version: int, fields: dict[str, Any] | None = None) -> Any:
        self.send(api_key, version, fields)
        return self.recv()


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The target's ApiVersions answer as {key: (min, max)}, asked at v0 (every broker has it)."""
    with Conn(bootstrap) as c:
        resp = c.call(18, 0)
    assert resp.error_code == 0, resp
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def highest(versions: dict[int, tuple[int, int]], api_key: int) -> int:
    """The highest version both the target and kafka-python speak."""
    lo, hi = versions[api_key]
    v = min(hi, request_class(api_key).max_version, response_class(api_key).max_version)
    if v < lo:
        raise LookupError(f"no common version for API key {api_key}")
    return v


def _convert(struct: Any, version: int, values: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts -> kafka-python data objects; fields outside `version` are dropped."""
    out: dict[str, Any] = {}
    for name, val in values.items():
        field = struct.fields[name]  # KeyError: a misspelt field, a bug in the test
        if not field.for_version_q(version):
            continue
        if field.is_struct_array() and val is not None:
            val = [field.data_class(version=version, **_convert(field, version, x))
                   if isinstance(x, dict) else x for x in val]
        elif field.is_struct() and isinstance(val, dict):
            val = field.data_class(version=version, **_convert(field, version, val))
        out[name] = val
    return out


def build(api_key: int, version: int, fields: dict[str, Any]) -> Any:
    cls = request_class(api_key)
    return cls[version](**_convert(cls._struct, version, fields))
