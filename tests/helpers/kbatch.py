# Test helpers shared by the unit and integration tests: record batches built by
# kafka-python's DefaultRecordBatchBuilder, and requests/responses framed by kafka-python's
# `kafka.protocol`, an implementation independent of kafkalite's codec.
from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any, Iterable

from kafka.protocol.api_header import ResponseHeader
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Rec = tuple  # (key, value, headers, timestamp)


def build_batch(records: Iterable[Rec], codec: int = 0, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One magic-v2 batch, offsets 0..n-1, exactly as kafka-python's producer builds it."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(b.build())


def simple_batch(n: int = 1, ts: int | None = None, size: int = 10, codec: int = 0,
                 tag: bytes = b"", **kw: Any) -> bytes:
    """n small records stamped from `ts` (default now: old stamps fall to retention)."""
    if ts is None:
        ts = int(time.time() * 1000)
    return build_batch([(b"k%d" % i, tag + bytes([65 + i % 26]) * size, [("h", b"v")], ts + i)
                        for i in range(n)], codec, **kw)


def decode_records(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    """(offset, timestamp, key, value, headers) of every whole batch in fetched bytes; a
    partial batch at the end (allowed by the protocol) is ignored, as clients do."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if end > len(data):
            break
        batch = DefaultRecordBatch(data[pos:end])
        assert batch.validate_crc(), f"CRC mismatch in batch at byte {pos}"
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
        pos = end
    return out


def stored_form(batch: bytes, base_offset: int) -> bytes:
    """A produced batch as the log must store it: offsets assigned, leader epoch 0."""
    return struct.pack(">qii", base_offset, len(batch) - 12, 0) + batch[16:]


# --- raw protocol over a socket ---------------------------------------------------------------

def request_bytes(req: Any, correlation_id: int, client_id: str = "kbatch") -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return req.encode(header=True, framed=True)


def decode_response(cls: Any, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, response) of one unframed response; ApiVersions' header is v0."""
    flexible = cls.flexible_version_q(version) and cls.API_KEY != 18
    buf = io.BytesIO(payload)
    header = ResponseHeader.decode(buf, flexible=flexible)
    return header.correlation_id, cls.decode(payload[buf.tell():], version=version)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.settimeout(timeout)
    return s


def call(sock: socket.socket, req: Any, correlation_id: int = 1) -> Any:
    """Send one kafka-python request and decode its response."""
    sock.sendall(request_bytes(req, correlation_id))
    corr, resp = decode_response(_response_cls(req), req.API_VERSION, recv_frame(sock))
    assert corr == correlation_id
    return resp


def _response_cls(req: Any) -> Any:
    from kafka.protocol.api_header import ResponseClassRegistry
    return ResponseClassRegistry._response_class_registry[req.API_KEY]


def is_closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True if the peer closes the connection (EOF or reset) within `timeout` seconds."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def produce_raw(sock: socket.socket, topic: str, partition: int, records: bytes,
                acks: int = -1, version: int = 9, correlation_id: int = 1) -> Any:
    """One Produce request; returns the partition response (None for acks=0)."""
    from kafka.protocol.producer import ProduceRequest
    Req = ProduceRequest[version]
    T = Req.TopicProduceData
    req = Req(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition,
                                                             records=records)])])
    if acks == 0:
        sock.sendall(request_bytes(req, correlation_id))
        return None
    return call(sock, req, correlation_id).responses[0].partition_responses[0]


def fetch_raw(sock: socket.socket, topic: str, partition: int, offset: int,
              max_bytes: int = 1 << 20, max_wait_ms: int = 0, version: int = 12,
              correlation_id: int = 1) -> Any:
    """One sessionless Fetch of one partition; returns its partition response."""
    from kafka.protocol.consumer import FetchRequest
    Req = FetchRequest[version]
    T = Req.FetchTopic
    req = Req(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
              isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
              rack_id="", topics=[T(topic=topic, partitions=[T.FetchPartition(
                  partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes,
                  current_leader_epoch=-1, log_start_offset=-1)])])
    return call(sock, req, correlation_id).responses[0].partitions[0]


def batch_headers(data: bytes) -> list:
    """Parsed headers (kafkalite.wire.records.BatchHeader) of the whole batches in `data`."""
    from kafkalite.wire.records import parse_header
    out, pos = [], 0
    while pos + 61 <= len(data):
        h = parse_header(data, pos)
        if pos + h.size > len(data):
            break
        out.append(h)
        pos += h.size
    return out
