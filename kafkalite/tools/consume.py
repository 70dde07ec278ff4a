# `kafkalite consume`: kafka-console-consumer.sh, with kcat's conveniences, for quick work
# from a shell.
#
# Without --group the partitions are assigned directly (no group membership, nothing
# committed) and reading starts at the log end, or the beginning with --from-beginning, or
# --offset with --partition, as Kafka's console consumer does. With --group the consumer
# joins the group, starts from the committed offsets and commits what it printed.
# Plain output is the value, optionally preceded (in Kafka's DefaultMessageFormatter order)
# by CreateTime:/LogAppendTime:, Partition:, Offset:, headers and the key; --format takes a
# kcat -f string instead, and --json prints one object per record (see record_format.py
# for the format codes, the key/value encodings and the null rule).
#
# The command ends after --max-messages records; with --exit-at-end (kcat's -e) when every
# partition it reads has been read up to its end; after --timeout ms without a new record
# (default 10 s, so a command never waits without bound unless asked to with 0); or on
# Ctrl-C. A topic that does not exist is an error (it is not auto-created).
from __future__ import annotations

import argparse
import sys
import time

from .common import (add_command, check_reachable, client_settings, kafka_error, no_answer,
                     non_negative_int, positive_int)
from .output import decode_bytes, emit_json
from .record_format import ENCODINGS, FormatError, compile_format, encoder

_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
DEFAULT_TIMEOUT_MS = 10000
_POLL_MS = 200


def register(sub: argparse._SubParsersAction) -> None:
    s = add_command(sub, "consume", _consume, "print records of a topic",
                    json_help="print one JSON object per record (key, value, headers, "
                              "partition, offset, timestamp)",
                    timeout_default=DEFAULT_TIMEOUT_MS,
                    timeout_help="stop after MS milliseconds without a new record, and give "
                                 "up connecting after as long; 0 waits for records forever")
    # The old name of the idle timeout, kept working for existing scripts.
    s.add_argument("--timeout-ms", dest="timeout", type=non_negative_int,
                   help=argparse.SUPPRESS)
    s.add_argument("--topic", required=True)
    s.add_argument("--group", help="consume as this consumer group and commit offsets")
    s.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one")
    s.add_argument("--partition", type=non_negative_int, action="append",
                   help="read only this partition (repeatable)")
    s.add_argument("--offset", metavar="N|earliest|latest",
                   help="start offset in the --partition(s)")
    s.add_argument("--max-messages", "--count", "-c", dest="max_messages", type=positive_int,
                   metavar="N", help="stop after N records")
    s.add_argument("--exit-at-end", "-e", action="store_true",
                   help="stop once every partition read has been read to its end (kcat -e)")
    s.add_argument("--format", "-f", metavar="FMT",
                   help="kcat-style output format, e.g. '%%t %%p %%o %%k %%s\\n': "
                        "%%t topic, %%p partition, %%o offset, %%k key, %%s value, "
                        "%%K/%%S their lengths (-1 for null), %%T timestamp, %%h headers; "
                        "\\n \\t escapes")
    s.add_argument("--key-format", choices=ENCODINGS, default="utf8",
                   help="how keys are printed: utf8 (default; bytes that are not UTF-8 as "
                        "\\xNN), hex or base64")
    s.add_argument("--value-format", choices=ENCODINGS, default="utf8",
                   help="how values are printed (as --key-format)")
    s.add_argument("--null", dest="null_marker", default="", metavar="TEXT",
                   help="what a null key or value prints as (default: nothing; --json "
                        "prints null)")
    s.add_argument("-Z", dest="null_marker", action="store_const", const="NULL",
                   help="print null keys and values as NULL (kcat -Z)")
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
    # kafka-python wants its request timeout above the fetch wait.
    settings = {**client_settings(args), "request_timeout_ms": args.connect_ms,
                "bootstrap_timeout_ms": args.connect_ms}
    try:
        return KafkaConsumer(
            **settings, group_id=args.group,
            enable_auto_commit=args.group is not None, auto_commit_interval_ms=1000,
            auto_offset_reset="earliest" if args.from_beginning else "latest",
            allow_auto_create_topics=False, fetch_max_wait_ms=_POLL_MS)
    except Errors.KafkaTimeoutError:
        raise no_answer(args.bootstrap_server, args.connect_ms) from None


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
    printer = _printer(args)
    args.connect_ms = max(args.timeout or DEFAULT_TIMEOUT_MS, 2 * _POLL_MS)
    check_reachable(args.bootstrap_server, args.connect_ms / 1000)
    consumer = _consumer(args)
    printed = 0
    try:
        tps = _partitions(consumer, args)
        if args.group is not None and args.partition is None:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            _position(consumer, tps, args, start)
        ends: dict = {}
        idle_limit = args.timeout / 1000 if args.timeout else None
        last = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            if args.exit_at_end and _at_end(consumer, ends):
                break
            remaining = None if args.max_messages is None else args.max_messages - printed
            batches = consumer.poll(timeout_ms=_POLL_MS, max_records=remaining)
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


def _at_end(consumer, ends: dict) -> bool:
    """Whether every assigned partition has been read up to its end offset.

    The end is the high watermark of the latest fetch, or before any fetch the end offset
    asked for once (ListOffsets). A group member has nothing assigned until it has joined,
    which is not the end.
    """
    assigned = consumer.assignment()
    if not assigned:
        return False
    unknown = [tp for tp in assigned if tp not in ends]
    if unknown:
        ends.update(consumer.end_offsets(unknown))
    for tp in assigned:
        high = consumer.highwater(tp)
        if consumer.position(tp) < (ends[tp] if high is None else high):
            return False
    return True


def _printer(args: argparse.Namespace):
    key_text, value_text = encoder(args.key_format), encoder(args.value_format)
    null = args.null_marker
    if args.format is not None:
        if args.json:
            args.parser.error("--format and --json do not go together")
        try:
            render = compile_format(args.format, key_text, value_text, null)
        except FormatError as e:
            args.parser.error(f"--format: {e}")
        out_bytes = sys.stdout.buffer
        return lambda r: out_bytes.write(render(r))

    out = sys.stdout
    if args.json:
        def shown(data: bytes | None, text) -> str | None:
            return None if data is None else text(data)

        def print_json(r) -> None:
            emit_json({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                       "timestamp": r.timestamp,
                       "timestamp_type": _TIMESTAMP_TYPES.get(r.timestamp_type),
                       "key": shown(r.key, key_text), "value": shown(r.value, value_text),
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
            line += (null if r.key is None else key_text(r.key)) + sep
        out.write(line + (null if r.value is None else value_text(r.value)) + "\n")
    return print_plain
