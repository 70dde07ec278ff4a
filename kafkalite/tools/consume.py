# `kafkalite consume`: kafka-console-consumer.sh for quick work from a shell.
#
# Without --group the partitions are assigned directly (no group membership, nothing
# committed) and reading starts at the log end, or the beginning with --from-beginning, or
# --offset with --partition, as Kafka's console consumer does. With --group the consumer
# joins the group, starts from the committed offsets and commits what it printed.
# Plain output is the value, optionally preceded (in Kafka's DefaultMessageFormatter order)
# by CreateTime:/LogAppendTime:, Partition:, Offset:, headers and the key; --json prints one
# object per record with topic, partition, offset, timestamp, key, value and headers
# (an object: a header key repeated in one record keeps its last value). Bytes that are not
# UTF-8 appear as \xNN escapes.
# The command ends after --max-messages records, after --timeout-ms without a new record,
# or on Ctrl-C. A topic that does not exist is an error (it is not auto-created).
from __future__ import annotations

import argparse
import sys
import time

from .common import (CliError, add_command, check_reachable, client_settings, kafka_error,
                     non_negative_int, positive_int)
from .output import decode_bytes, emit_json

_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def register(sub: argparse._SubParsersAction) -> None:
    s = add_command(sub, "consume", _consume, "print records of a topic",
                    json_help="print one JSON object per record (key, value, headers, "
                              "partition, offset, timestamp)")
    s.add_argument("--topic", required=True)
    s.add_argument("--group", help="consume as this consumer group and commit offsets")
    s.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one")
    s.add_argument("--partition", type=non_negative_int, action="append",
                   help="read only this partition (repeatable)")
    s.add_argument("--offset", metavar="N|earliest|latest",
                   help="start offset in the --partition(s)")
    s.add_argument("--max-messages", "--count", dest="max_messages", type=positive_int,
                   metavar="N", help="stop after N records")
    s.add_argument("--timeout-ms", type=positive_int, metavar="MS",
                   help="stop when no record arrives for MS milliseconds")
    s.add_argument("--print-key", action="store_true", help="print the key before the value")
    s.add_argument("--key-separator", default="\t", metavar="SEP",
                   help="between key and value (default: tab); implies --print-key")
    s.add_argument("--print-headers", action="store_true", help="print headers as k:v,k:v")
    s.add_argument("--print-partition", action="store_true")
    s.add_argument("--print-offset", action="store_true")
    s.add_argument("--print-timestamp", action="store_true")


def _start_offset(args: argparse.Namespace) -> int | str | None:
    if args.offset is None:
        return None
    if args.partition is None:
        args.parser.error("--offset needs --partition")
    if args.offset in ("earliest", "latest"):
        return args.offset
    try:
        n = int(args.offset)
    except ValueError:
        n = -1
    if n < 0:
        args.parser.error(f"--offset must be earliest, latest or a number >= 0, "
                          f"got {args.offset!r}")
    return n


def _consumer(args: argparse.Namespace):
    from kafka import KafkaConsumer
    import kafka.errors as Errors
    try:
        return KafkaConsumer(
            **client_settings(args), group_id=args.group,
            enable_auto_commit=args.group is not None, auto_commit_interval_ms=1000,
            auto_offset_reset="earliest" if args.from_beginning else "latest",
            allow_auto_create_topics=False, fetch_max_wait_ms=200)
    except Errors.KafkaTimeoutError:
        raise CliError(f"no Kafka broker answered at {args.bootstrap_server} "
                       f"within {args.timeout} ms") from None


def _partitions(consumer, args: argparse.Namespace) -> list:
    from kafka.structs import TopicPartition
    known = consumer.partitions_for_topic(args.topic)  # asks the broker when not cached
    if not known:
        raise kafka_error(3, f"Topic '{args.topic}' does not exist.")
    wanted = sorted(known) if args.partition is None else sorted(set(args.partition))
    for p in wanted:
        if p not in known:
            raise kafka_error(3, f"Partition {p} of topic '{args.topic}' does not exist "
                                 f"(the topic has {len(known)}).")
    return [TopicPartition(args.topic, p) for p in wanted]


def _position(consumer, tps: list, args: argparse.Namespace, start) -> None:
    """Where a consumer without group membership starts (Kafka's console consumer rules)."""
    if isinstance(start, int):
        for tp in tps:
            consumer.seek(tp, start)
    elif start == "earliest" or (start is None and args.from_beginning
                                 and args.group is None):
        consumer.seek_to_beginning(*tps)
    elif start == "latest" or args.group is None:
        consumer.seek_to_end(*tps)
    # else: a group's committed offsets, or auto_offset_reset when it has none


def _consume(args: argparse.Namespace) -> int:
    start = _start_offset(args)
    check_reachable(args.bootstrap_server, args.timeout / 1000)
    consumer = _consumer(args)
    printed = 0
    try:
        tps = _partitions(consumer, args)
        if args.group is not None and args.partition is None:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            _position(consumer, tps, args, start)
        printer = _printer(args)
        idle_limit = args.timeout_ms / 1000 if args.timeout_ms else None
        last = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            remaining = None if args.max_messages is None else args.max_messages - printed
            batches = consumer.poll(timeout_ms=200, max_records=remaining)
            for tp in sorted(batches):
                for record in batches[tp]:
                    printer(record)
                    printed += 1
            if batches:
                sys.stdout.flush()
                last = time.monotonic()
            elif idle_limit is not None and time.monotonic() - last >= idle_limit:
                break
    finally:
        sys.stdout.flush()
        consumer.close(autocommit=args.group is not None)
    return 0


def _printer(args: argparse.Namespace):
    out = sys.stdout
    if args.json:
        def print_json(r) -> None:
            emit_json({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                       "timestamp": r.timestamp,
                       "timestamp_type": _TIMESTAMP_TYPES.get(r.timestamp_type),
                       "key": decode_bytes(r.key), "value": decode_bytes(r.value),
                       "headers": {k: decode_bytes(v) for k, v in r.headers or ()}},
                      out, lines=True)
        return print_json

    print_key = args.print_key or args.key_separator != "\t"
    sep = args.key_separator

    def print_plain(r) -> None:
        fields = []
        if args.print_timestamp:
            fields.append(f"{_TIMESTAMP_TYPES.get(r.timestamp_type, 'NoTimestampType')}:"
                          f"{r.timestamp}")
        if args.print_partition:
            fields.append(f"Partition:{r.partition}")
        if args.print_offset:
            fields.append(f"Offset:{r.offset}")
        if args.print_headers:
            fields.append(",".join(f"{k}:{decode_bytes(v)}" for k, v in r.headers or ())
                          or "NO_HEADERS")
        line = "\t".join(fields) + ("\t" if fields else "")
        if print_key:
            line += _text(r.key) + sep
        out.write(line + _text(r.value) + "\n")
    return print_plain


def _text(data: bytes | None) -> str:
    return "null" if data is None else decode_bytes(data)
