# A minimal blocking admin client over kafkalite's own wire layer (kio entities), for the
# pytest plugin: creating and deleting topics must not pull in a client library (kafka-python
# prints hundreds of DeprecationWarnings into the user's test run on import). Non-flexible
# request versions keep the framing to header v1 / response header v0, which any broker
# that serves CreateTopics v2-7 and DeleteTopics v1-6 (Kafka 2.4+, kafkalite) answers.
from __future__ import annotations

import datetime
import socket
import struct
from typing import Any

from kio.schema.create_topics.v4 import request as create_req
from kio.schema.delete_topics.v3.request import DeleteTopicsRequest
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta

from .wire.codec import encode, response_class
from .wire.errors import ErrorCode, KafkaError

_CREATE_TOPICS, _DELETE_TOPICS = 19, 20
_SIZE = struct.Struct(">i")
_REQ_HEADER = struct.Struct(">hhih")


class AdminWire:
    """One connection to `bootstrap` (host:port); create_topic / delete_topics raise
    KafkaError carrying the broker's error code."""

    def __init__(self, bootstrap: str, client_id: str = "kafkalite-admin",
                 timeout_s: float = 30.0):
        host, _, port = bootstrap.rpartition(":")
        self._sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
        self._client_id = client_id.encode()
        self._correlation = 0
        self._timeout = i32Timedelta.parse(datetime.timedelta(seconds=timeout_s))

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send kio request entity `body` (a non-flexible version) and return the decoded
        response entity."""
        self._correlation += 1
        payload = (_REQ_HEADER.pack(api_key, version, self._correlation, len(self._client_id))
                   + self._client_id + encode(body))
        self._sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(self._recv(4))
        frame = self._recv(size)
        (correlation,) = _SIZE.unpack_from(frame, 0)
        if correlation != self._correlation:
            raise ConnectionError(f"response for correlation id {correlation}, "
                                  f"expected {self._correlation}")
        entity, _ = entity_reader(response_class(api_key, version))(frame, 4)
        return entity

    def _recv(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self._sock.recv(left)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        topic = create_req.CreatableTopic(
            name=name, num_partitions=i32(partitions), replication_factor=i16(1),
            assignments=(), configs=tuple(create_req.CreatableTopicConfig(name=k, value=str(v))
                                          for k, v in (config or {}).items()))
        resp = self.call(_CREATE_TOPICS, 4, create_req.CreateTopicsRequest(
            topics=(topic,), timeout=self._timeout))
        for result in resp.topics:
            if result.error_code != ErrorCode.none:
                raise KafkaError(result.error_code, f"creating topic {name!r}: "
                                 f"{result.error_code.name.upper()}"
                                 + (f" ({result.error_message})" if result.error_message else ""))

    def delete_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        """Delete `names`; returns each topic's error code (none on success)."""
        if not names:
            return {}
        resp = self.call(_DELETE_TOPICS, 3, DeleteTopicsRequest(
            topic_names=tuple(names), timeout=self._timeout))
        return {r.name: r.error_code for r in resp.responses}

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "AdminWire":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
