# `kafkalite health`: exit 0 when each bootstrap server answers ApiVersions and Metadata,
# exit 1 with one line otherwise. It is the Docker HEALTHCHECK, so it stays light: one raw
# socket per server, requests built with kio (kafkalite.wire) and no client library.
#
# ApiVersions goes first at v3 (Kafka 2.4+); a broker that does not know v3 answers v0
# with UNSUPPORTED_VERSION and its list (KIP-511), and the probe retries at v0. Metadata is
# then sent at the highest version both sides know (at least v1, where an empty topic
# list means "no topics": the probe asks for brokers only and never auto-creates a topic).
# Healthy means: both answered, the ApiVersions error code is 0 and Metadata lists at
# least one broker.
#
# --timeout bounds the whole probe of a server, connect included. Failures are worded as
# every other command words them (common.cannot_connect, common.no_answer), so a script
# that reads `kafkalite topics list` errors reads these too.
from __future__ import annotations

import argparse
import socket
import struct
import time

from .common import CliError, add_command, cannot_connect, no_answer, parse_bootstrap
from .output import emit_json

API_VERSIONS, METADATA = 18, 3
METADATA_VERSIONS = (1, 12)  # what this probe encodes; v0 would mean "all topics"
UNSUPPORTED_VERSION = 35
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")


def register(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "health", _health, "exit 0 if the broker answers ApiVersions and Metadata",
                timeout_default=5000, command_config=False)


class _Connection:
    def __init__(self, host: str, port: int, deadline: float):
        self.deadline = deadline
        self.sock = socket.create_connection((host, port), timeout=self._left())
        self.correlation = 0

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left

    def request(self, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
        """Send one request and return the response body (header stripped)."""
        from ..wire.header import skip_tagged_fields
        self.correlation += 1
        client = b"kafkalite-health"
        header = _HEADER.pack(api_key, version, self.correlation, len(client)) + client
        if flexible:
            header += b"\x00"  # request header v2: no tagged fields
        frame = header + body
        self.sock.settimeout(self._left())
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        (size,) = _SIZE.unpack(self._read(4))
        payload = self._read(size)
        (correlation,) = _SIZE.unpack_from(payload, 0)
        if correlation != self.correlation:
            raise ValueError(f"response has correlation id {correlation}, "
                             f"expected {self.correlation}")
        # ApiVersions always answers with response header v0 (no tagged fields).
        if flexible and api_key != API_VERSIONS:
            return payload[skip_tagged_fields(payload, 4):]
        return payload[4:]

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            self.sock.settimeout(self._left())
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def _call(conn: _Connection, api_key: int, version: int, **fields):
    import dataclasses
    from kio.serial import entity_reader
    from ..wire.codec import encode, request_class, response_class
    cls = request_class(api_key, version)
    names = {f.name for f in dataclasses.fields(cls)}
    body = encode(cls(**{k: v for k, v in fields.items() if k in names}))
    raw = conn.request(api_key, version, body, bool(cls.__flexible__))
    response, _size = entity_reader(response_class(api_key, version))(raw, 0)
    return response


def probe(host: str, port: int, timeout_s: float) -> dict:
    """ApiVersions then Metadata on one connection; raises on any failure."""
    from ..wire.codec import request_class, response_class
    for key, v in ((API_VERSIONS, 3), (API_VERSIONS, 0), (METADATA, METADATA_VERSIONS[1])):
        request_class(key, v), response_class(key, v)  # load kio before the clock starts
    start = time.monotonic()
    try:
        conn = _Connection(host, port, start + timeout_s)
    except OSError as e:  # refused, or not accepted in time
        raise cannot_connect([(host, port, e)]) from None
    try:
        av_version = 3
        versions = _call(conn, API_VERSIONS, av_version,
                         client_software_name="kafkalite-health", client_software_version="1")
        if versions.error_code == UNSUPPORTED_VERSION:
            av_version = 0
            versions = _call(conn, API_VERSIONS, av_version)
        if versions.error_code != 0:
            raise CliError(f"{host}:{port} answered ApiVersions with error code "
                           f"{int(versions.error_code)}")
        ranges = {int(k.api_key): (int(k.min_version), int(k.max_version))
                  for k in versions.api_keys}
        if METADATA not in ranges:
            raise CliError(f"{host}:{port} does not offer the Metadata API")
        low, high = ranges[METADATA]
        version = min(high, METADATA_VERSIONS[1])
        if version < max(low, METADATA_VERSIONS[0]):
            raise CliError(f"no common Metadata version with {host}:{port} "
                           f"(it offers v{low}-v{high})")
        meta = _call(conn, METADATA, version, topics=(), allow_auto_topic_creation=False,
                     include_cluster_authorized_operations=False,
                     include_topic_authorized_operations=False)
    finally:
        conn.close()
    if not meta.brokers:
        raise CliError(f"{host}:{port} answered Metadata with no brokers")
    return {"server": f"{host}:{port}", "healthy": True,
            "api_versions_version": av_version,
            "metadata_version": version, "cluster_id": getattr(meta, "cluster_id", None),
            "controller_id": int(getattr(meta, "controller_id", -1)),
            "brokers": len(meta.brokers),
            "elapsed_ms": round((time.monotonic() - start) * 1000, 1)}


def _health(args: argparse.Namespace) -> int:
    reports = []
    for host, port in parse_bootstrap(args.bootstrap_server):
        try:
            reports.append(probe(host, port, args.timeout / 1000))
        except CliError:
            raise
        except TimeoutError:
            raise no_answer(f"{host}:{port}", args.timeout) from None
        except OSError as e:  # reset or closed after connecting
            raise CliError(f"lost the connection to {host}:{port}: "
                           f"{e.strerror or e or type(e).__name__}") from None
        except Exception as e:  # noqa: BLE001 - whatever a non-Kafka peer makes kio raise
            raise CliError(f"malformed answer from {host}:{port} (is this a Kafka broker?): "
                           f"{e or type(e).__name__}") from None
    if args.json:
        emit_json(reports)
    else:
        for r in reports:
            print(f"ok: {r['server']} answered ApiVersions and Metadata "
                  f"v{r['metadata_version']} in {r['elapsed_ms']} ms "
                  f"(cluster {r['cluster_id']}, {r['brokers']} broker(s), "
                  f"controller {r['controller_id']})")
    return 0
