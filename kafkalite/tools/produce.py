# `kafkalite produce`: kafka-console-producer.sh for quick work from a shell. One record per
# input line (stdin, or --value), as Kafka's LineMessageReader reads them: the line ending
# is dropped, an empty line is a record with an empty value. With --key-separator the line
# is KEY<sep>VALUE and a line without the separator is an error, as with Kafka's
# parse.key=true. --format json reads one object per line,
# {"key", "value", "headers", "partition", "timestamp"} (all optional but one of key/value),
# which is what `kafkalite consume --json` prints, so the two can be piped together.
#
# Delivery goes through kafka-python's KafkaProducer (idempotent with acks=all, as Kafka's
# default); every record's result is checked, and the first failure ends the command.
from __future__ import annotations

import argparse
import json
import sys
from typing import Iterator

from .common import (CliError, add_command, check_reachable, client_settings, key_value,
                     kafka_error, no_answer, non_negative_int)
from .output import emit_json

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
_WINDOW = 1000  # records in flight before the oldest results are collected


def register(sub: argparse._SubParsersAction) -> None:
    s = add_command(sub, "produce", _produce, "send records from stdin (one per line) to a topic",
                    json_help="print each record's partition, offset and timestamp as JSON")
    s.add_argument("--topic", required=True)
    s.add_argument("--format", choices=("plain", "json"), default="plain",
                   help="input lines: plain text (default) or JSON objects with "
                        "key, value, headers, partition, timestamp")
    s.add_argument("--key-separator", metavar="SEP",
                   help="plain lines are KEY<SEP>VALUE (e.g. ':' or $'\\t')")
    s.add_argument("--value", action="append", metavar="TEXT",
                   help="send this value instead of reading stdin (repeatable)")
    s.add_argument("--key", help="key for every --value record")
    s.add_argument("--header", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="header added to every record (repeatable)")
    s.add_argument("--partition", type=non_negative_int,
                   help="send every record to this partition")
    s.add_argument("--acks", choices=("all", "-1", "0", "1"), default="all",
                   help="acknowledgements to wait for (default all)")
    s.add_argument("--compression", choices=COMPRESSION, default="none")


def _encode(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    # A JSON number, object or list is sent as its JSON text.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _json_headers(raw, where: str) -> list[tuple[str, bytes]]:
    if raw is None:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    try:
        return [(str(k), _encode(v) or b"") for k, v in items]
    except (TypeError, ValueError):
        raise CliError(f"{where}: headers must be an object or a list of [key, value] "
                       f"pairs") from None


def _records(args: argparse.Namespace) -> Iterator[dict]:
    """Records to send, as send() keyword arguments, from --value or stdin."""
    headers = [(k, v.encode("utf-8")) for k, v in args.header]
    if args.value is not None:
        for v in args.value:
            yield {"key": _encode(args.key), "value": v.encode("utf-8"),
                   "headers": list(headers), "partition": args.partition}
        return
    sep = args.key_separator.encode("utf-8") if args.key_separator else None
    for number, raw in enumerate(sys.stdin.buffer, 1):
        line = raw.rstrip(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
        if args.format == "json":
            yield _json_record(line, number, headers, args.partition)
            continue
        key = None
        if sep is not None:
            key, found, rest = line.partition(sep)
            if not found:
                raise CliError(f"no key separator {args.key_separator!r} found on line "
                               f"{number}: {line.decode('utf-8', 'replace')!r}")
            line = rest
        yield {"key": key, "value": line, "headers": list(headers),
               "partition": args.partition}


def _json_record(line: bytes, number: int, headers: list, partition: int | None) -> dict:
    where = f"line {number}"
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise CliError(f"{where}: invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise CliError(f"{where}: expected a JSON object with key/value/headers")
    if "key" not in obj and "value" not in obj:
        raise CliError(f"{where}: a record needs a key or a value")
    record_partition = obj.get("partition", partition) if partition is None else partition
    timestamp = obj.get("timestamp")
    for name, field in (("partition", record_partition), ("timestamp", timestamp)):
        if field is not None and (type(field) is not int or field < 0):
            raise CliError(f"{where}: {name} must be a non-negative integer")
    return {"key": _encode(obj.get("key")), "value": _encode(obj.get("value")),
            "headers": headers + _json_headers(obj.get("headers"), where),
            "partition": record_partition, "timestamp_ms": timestamp}


def _producer(args: argparse.Namespace):
    from kafka import KafkaProducer
    import kafka.errors as Errors
    acks = -1 if args.acks in ("all", "-1") else int(args.acks)
    settings = client_settings(args)
    try:
        return KafkaProducer(
            **settings, acks=acks, enable_idempotence=acks == -1,
            compression_type=None if args.compression == "none" else args.compression,
            linger_ms=5, max_block_ms=args.timeout,
            # kafka-python wants delivery >= linger + request timeout
            delivery_timeout_ms=args.timeout + 5 + 1000)
    except Errors.KafkaTimeoutError:
        raise no_answer(args.bootstrap_server, args.timeout) from None


def _partitions(producer, args: argparse.Namespace) -> set[int]:
    import kafka.errors as Errors
    try:
        return set(producer.partitions_for(args.topic) or ())
    except Errors.KafkaTimeoutError:
        raise kafka_error(3, f"Topic '{args.topic}' not present in metadata after "
                             f"{args.timeout} ms.") from None


def _check_partition(partition: int | None, partitions: set[int], topic: str) -> None:
    if partition is not None and partition not in partitions:
        raise kafka_error(3, f"Partition {partition} of topic '{topic}' does not exist "
                             f"(the topic has {len(partitions)}).")


def _produce(args: argparse.Namespace) -> int:
    if args.key is not None and args.value is None:
        args.parser.error("--key goes with --value (for stdin lines use --key-separator)")
    check_reachable(args.bootstrap_server, args.timeout / 1000)
    producer = _producer(args)
    sent = 0
    try:
        partitions = _partitions(producer, args)
        _check_partition(args.partition, partitions, args.topic)
        pending = []
        for record in _records(args):
            _check_partition(record["partition"], partitions, args.topic)
            try:
                pending.append(producer.send(args.topic, **record))
            except ValueError as e:
                raise CliError(str(e)) from None
            if len(pending) >= _WINDOW:
                sent += _collect(pending[:_WINDOW // 2], args)
                del pending[:_WINDOW // 2]
        producer.flush(timeout=args.timeout / 1000 + 5)
        sent += _collect(pending, args)
    finally:
        producer.close(timeout=2)
    if not args.json:
        print(f"Produced {sent} record(s) to {args.topic}.")
    return 0


def _collect(futures: list, args: argparse.Namespace) -> int:
    for future in futures:
        meta = future.get(timeout=args.timeout / 1000 + 5)
        if args.json:
            emit_json({"topic": meta.topic, "partition": meta.partition,
                       "offset": meta.offset, "timestamp": meta.timestamp}, lines=True)
    return len(futures)
