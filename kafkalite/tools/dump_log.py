# `kafkalite dump-log PATH...`: kafka-dump-log.sh for kafkalite's (and Kafka's) segment
# files. A .log file is walked batch by batch: each batch line carries the header fields and
# whether its CRC32C holds (in kafka-dump-log.sh 3.8's words: `crc: N isvalid: B`, and the
# KIP-534 delete horizon the log cleaner set, `deleteHorizonMs: OptionalLong[N]`, or
# `OptionalLong.empty`); each record line its offset, timestamp, key, value and headers
# (values cut at --max-value-chars and escaped so one record stays one line). Control
# batches show their transaction marker. .index and .timeindex files list their entries.
#
# Reading stops at the first batch that does not fit the file (a torn tail, which the
# broker's recovery truncates) and reports the bytes left over, as Kafka does. A bad CRC
# does not stop the walk: the batch is reported with isvalid false and decoded if it can be.
# A file that is not a segment (another suffix, or a .log that does not begin with a record
# batch: an unknown magic byte or a negative length) is an error, not a dump of noise. The
# text dump of a .log ends with its count of batches and records and its size ("0 batches"
# when empty); the lines before it are kafka-dump-log.sh's.
#
# A partition directory stands for its .log files, oldest first. --summary prints one line
# per segment instead (base offset, last offset, records, batches, size, and how many
# offsets of its range no record holds): after the log cleaner ran, the sizes fall and the
# offset gaps show there.
from __future__ import annotations

import argparse
import mmap
import os
import struct
from typing import Iterator

from .common import CliError, non_negative_int
from .output import cut, decode_bytes, emit_json, escape

_MAGIC_AT = 16
_CONTROL = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
_MARKERS = {0: "ABORT", 1: "COMMIT"}
_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_KINDS = (".log", ".index", ".timeindex")
_FIRST = struct.Struct(">qi")  # baseOffset, batchLength
_DELETE_HORIZON_BIT = 0x40  # KIP-534: the base timestamp is the delete horizon


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("dump-log", help="print the batches and records of segment files")
    s.add_argument("paths", nargs="+", metavar="PATH",
                   help="a segment .log file (or its .index / .timeindex), or a partition "
                        "directory (its .log files)")
    s.add_argument("--batches-only", action="store_true", help="do not print records")
    s.add_argument("--summary", action="store_true",
                   help="one line per segment: offsets, record and batch counts, size")
    s.add_argument("--max-value-chars", type=non_negative_int, default=200, metavar="N",
                   help="cut keys, values and header values after N characters "
                        "(default 200; 0 = never)")
    s.add_argument("--json", action="store_true",
                   help="one JSON object per batch (records included) or index entry")
    s.set_defaults(func=_dump)


def _base_offset(path: str, kind: str) -> int:
    """The base offset a segment's name gives; an index needs it to read its entries."""
    stem = os.path.basename(path)[:-len(kind)]
    if stem.isdigit():
        return int(stem)
    if kind != ".log":
        raise CliError(f"{path} is not a segment index: its name must be the base offset, "
                       f"like 00000000000000000000{kind}")
    return 0


def _check_kind(path: str) -> str:
    kind = os.path.splitext(path)[1]
    if kind not in _KINDS:
        raise CliError(f"{path} is not a segment file: expected a .log, .index or "
                       f".timeindex file")
    return kind


def _check_first_batch(path: str, buf) -> None:
    """Refuse a .log whose first bytes cannot begin a record batch of any message format.

    A batch cut short (a torn tail, even at position 0) is still a segment's content.
    """
    if len(buf) <= _MAGIC_AT:
        return
    _base, length = _FIRST.unpack_from(buf, 0)
    magic = buf[_MAGIC_AT]
    if length < 0 or magic > 2:
        raise CliError(f"{path} is not a log segment: no record batch at position 0 "
                       f"(batch length {length}, magic byte {magic})")


def _cut(data: bytes | None, limit: int | None) -> str | None:
    return None if data is None else cut(decode_bytes(data), limit, len(data))


def _record(r, h, limit: int | None, control: bool) -> dict:
    seq = -1 if h.base_sequence < 0 else (h.base_sequence + r.offset - h.base_offset) % 2**31
    out = {"offset": r.offset, "timestamp": r.timestamp, "sequence": seq,
           "key_size": -1 if r.key is None else len(r.key),
           "value_size": -1 if r.value is None else len(r.value),
           "key": _cut(r.key, limit), "value": _cut(r.value, limit),
           "headers": [{"key": k, "value": _cut(v, limit)} for k, v in r.headers]}
    if control and r.key is not None and len(r.key) >= _CONTROL.size:
        _version, kind = _CONTROL.unpack_from(r.key)
        out["control"] = {"marker": _MARKERS.get(kind, f"UNKNOWN({kind})")}
        if kind in _MARKERS and r.value is not None and len(r.value) >= _MARKER_VALUE.size:
            out["control"]["coordinator_epoch"] = _MARKER_VALUE.unpack_from(r.value)[1]
    return out


def _batches(buf, limit: int | None, with_records: bool) -> Iterator[dict]:
    # kafkalite.wire loads kio, which the other commands must not pay for at startup.
    from ..wire.record_iter import iter_records
    from ..wire.records import (COMPRESSION_NAMES, CONTROL_BIT, LOG_OVERHEAD,
                                MIN_BATCH_LENGTH, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
                                crc_ok, parse_header, read_offset_and_length)
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < _MAGIC_AT + 1:
            yield {"invalid_bytes": end - pos, "position": pos}
            return
        base, size = read_offset_and_length(buf, pos)
        magic = buf[pos + _MAGIC_AT]
        if size - LOG_OVERHEAD < (MIN_BATCH_LENGTH if magic == 2 else 0) or pos + size > end:
            yield {"invalid_bytes": end - pos, "position": pos}
            return
        if magic != 2:
            yield {"position": pos, "base_offset": base, "size": size, "magic": magic,
                   "error": f"message format v{magic} is not decoded"}
            pos += size
            continue
        h = parse_header(buf, pos)
        batch = {
            "position": pos, "base_offset": h.base_offset, "last_offset": h.last_offset,
            "count": h.records_count, "base_sequence": h.base_sequence,
            "last_sequence": -1 if h.base_sequence < 0
            else (h.base_sequence + h.last_offset_delta) % 2**31,
            "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
            "partition_leader_epoch": h.partition_leader_epoch,
            "is_transactional": bool(h.attributes & TRANSACTIONAL_BIT),
            "is_control": bool(h.attributes & CONTROL_BIT),
            "delete_horizon_ms": h.base_timestamp if h.attributes & _DELETE_HORIZON_BIT
            else None,
            "timestamp_type": "LogAppendTime" if h.attributes & TIMESTAMP_TYPE_BIT
            else "CreateTime",
            "max_timestamp": h.max_timestamp, "size": size, "magic": 2,
            "compression": COMPRESSION_NAMES.get(h.compression, f"unknown({h.compression})"),
            "crc": h.crc, "crc_valid": crc_ok(buf, pos, size)}
        if with_records:
            try:
                batch["records"] = [_record(r, h, limit, batch["is_control"])
                                    for r in iter_records(bytes(buf[pos:pos + size]))]
            except (ValueError, IndexError, OSError) as e:
                batch["error"] = f"cannot decode records: {e}"
        yield batch
        pos += size


def _index_entries(buf, base: int, timeindex: bool) -> Iterator[dict]:
    entry = _TIME_ENTRY if timeindex else _OFFSET_ENTRY
    for i in range(len(buf) // entry.size):
        a, b = entry.unpack_from(buf, i * entry.size)
        # Kafka preallocates index files: zero entries past the first are unused space.
        if i and a == 0 and b == 0:
            break
        yield ({"timestamp": a, "offset": base + b} if timeindex
               else {"offset": base + a, "position": b})


def _text_batch(b: dict) -> list[str]:
    if "invalid_bytes" in b:
        return [f"Found {b['invalid_bytes']} invalid bytes at position {b['position']} "
                f"(a truncated or corrupt batch)"]
    if b["magic"] != 2:
        return [f"baseOffset: {b['base_offset']} position: {b['position']} "
                f"size: {b['size']} magic: {b['magic']} ({b['error']})"]
    horizon = "OptionalLong.empty" if b["delete_horizon_ms"] is None \
        else f"OptionalLong[{b['delete_horizon_ms']}]"
    lines = [
        f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']} "
        f"baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']} "
        f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
        f"partitionLeaderEpoch: {b['partition_leader_epoch']} "
        f"isTransactional: {str(b['is_transactional']).lower()} "
        f"isControl: {str(b['is_control']).lower()} deleteHorizonMs: {horizon} "
        f"position: {b['position']} "
        f"{b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} magic: 2 "
        f"compresscodec: {b['compression']} crc: {b['crc']} "
        f"isvalid: {str(b['crc_valid']).lower()}"]
    for r in b.get("records", ()):
        line = (f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']} "
                f"keySize: {r['key_size']} valueSize: {r['value_size']} "
                f"sequence: {r['sequence']} "
                f"headerKeys: [{', '.join(escape(h['key']) for h in r['headers'])}]")
        if "control" in r:
            c = r["control"]
            line += f" endTxnMarker: {c['marker']}"
            if "coordinator_epoch" in c:
                line += f" coordinatorEpoch: {c['coordinator_epoch']}"
        else:
            if r["headers"]:
                line += " headers: " + ",".join(f"{h['key']}={_shown(h['value'])}"
                                                for h in r["headers"])
            line += f" key: {_shown(r['key'])} payload: {_shown(r['value'])}"
        lines.append(line)
    if "error" in b:
        lines.append(f"| {b['error']}")
    return lines


def _shown(value: str | None) -> str:
    return "null" if value is None else escape(value)


def _open(path: str):
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None


def _plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 'es' if word.endswith('h') else word + 's'}"


def _summary(path: str) -> dict:
    """One segment's base offset, last offset, record and batch counts and size."""
    if _check_kind(path) != ".log":
        raise CliError(f"{path}: --summary reads .log files")
    buf = _open(path)
    try:
        _check_first_batch(path, buf)
        base = _base_offset(path, ".log")
        out = {"file": path, "base_offset": base, "last_offset": base - 1, "records": 0,
               "batches": 0, "size": len(buf), "invalid_bytes": 0}
        for b in _batches(buf, None, False):
            if "invalid_bytes" in b:
                out["invalid_bytes"] = b["invalid_bytes"]
            elif "base_offset" in b:
                out["batches"] += 1
                out["records"] += b.get("count", 0)
                out["last_offset"] = b.get("last_offset", out["last_offset"])
        # offsets of the segment's range that no record holds: the cleaner's gaps
        out["missing_offsets"] = out["last_offset"] - base + 1 - out["records"]
        return out
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _print_summary(s: dict) -> None:
    line = (f"{s['file']} baseOffset: {s['base_offset']} lastOffset: {s['last_offset']} "
            f"records: {s['records']} batches: {s['batches']} size: {s['size']} "
            f"missingOffsets: {s['missing_offsets']}")
    if s["invalid_bytes"]:
        line += f" invalidBytes: {s['invalid_bytes']}"
    print(line)


def _dump_one(path: str, args: argparse.Namespace) -> None:
    limit = args.max_value_chars or None
    kind = _check_kind(path)
    buf = _open(path)
    try:
        base = _base_offset(path, kind)
        if kind in (".index", ".timeindex"):
            items = _index_entries(buf, base, kind == ".timeindex")
        else:
            _check_first_batch(path, buf)
            items = _batches(buf, limit, not args.batches_only)
        if not args.json:
            print(f"Dumping {path}")
            if kind not in (".index", ".timeindex"):
                print(f"Log starting offset: {base}")
        batches = records = 0
        for item in items:
            if args.json:
                emit_json({"file": path, **item}, lines=True)
            elif kind == ".index":
                print(f"offset: {item['offset']} position: {item['position']}")
            elif kind == ".timeindex":
                print(f"timestamp: {item['timestamp']} offset: {item['offset']}")
            else:
                print("\n".join(_text_batch(item)))
                if "base_offset" in item:
                    batches += 1
                    records += item.get("count", 0)
        if kind == ".log" and not args.json:
            print(f"{_plural(batches, 'batch')}, {_plural(records, 'record')}, "
                  f"{_plural(len(buf), 'byte')}")
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _expand(paths: list[str]) -> list[str]:
    """A partition directory stands for its .log files, by base offset."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            logs = sorted(n for n in os.listdir(path) if n.endswith(".log"))
            if not logs:
                raise CliError(f"{path} holds no .log segment files")
            out += [os.path.join(path, n) for n in logs]
        else:
            out.append(path)
    return out


def _dump(args: argparse.Namespace) -> int:
    paths = _expand(args.paths)
    if not args.summary:
        for path in paths:
            _dump_one(path, args)
        return 0
    rows = [_summary(path) for path in paths]
    for row in rows:
        if args.json:
            emit_json(row, lines=True)
        else:
            _print_summary(row)
    if not args.json:
        print(f"{_plural(len(rows), 'segment')}, "
              f"{_plural(sum(r['records'] for r in rows), 'record')}, "
              f"{_plural(sum(r['size'] for r in rows), 'byte')}")
    return 0
