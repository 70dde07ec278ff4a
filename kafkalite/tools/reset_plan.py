# What `kafkalite groups reset-offsets` would commit: the partitions it covers and each new
# offset, following kafka-consumer-groups.sh (ConsumerGroupCommand's reset options):
# --topic T or T:0,2 or --all-topics (the topics the group has committed offsets for);
# --to-earliest, --to-latest, --to-current, --to-offset N, --shift-by N, --to-datetime.
# Every target is clamped to [earliest, latest], with a warning on stderr in the words of
# Kafka's tool; a datetime after the last record resolves to the log end offset, as in Kafka.
from __future__ import annotations

import argparse
import sys

from .common import CliError, kafka_error, non_negative_int
from .topics import require_topic

LATEST, EARLIEST = -1, -2


def add_reset_arguments(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="topic, or topic:partitions, to reset (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-current", action="store_true", help="the committed offset")
    target.add_argument("--to-offset", type=non_negative_int, metavar="N",
                        help="an absolute offset")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="move the committed offset by N (negative moves back)")
    target.add_argument("--to-datetime", type=parse_datetime, metavar="YYYY-MM-DDTHH:MM:SS",
                        help="the first offset at or after this time (ISO 8601; local "
                             "time unless a zone such as Z or +02:00 is given)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true",
                      help="only show the new offsets (the default)")


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date-time."""
    from datetime import datetime
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a date-time like 2024-05-01T12:00:00[.sss][Z|+HH:MM], got {text!r}"
        ) from None
    return int(when.timestamp() * 1000)


def _topic_specs(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    out = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        if not topic:
            raise CliError(f"invalid --topic {spec!r}", exit_code=2)
        if not sep:
            out.append((topic, None))
            continue
        try:
            out.append((topic, sorted({int(p) for p in parts.split(",") if p.strip()})))
        except ValueError:
            raise CliError(f"invalid --topic {spec!r}: partitions must be numbers like "
                           f"{topic}:0,1", exit_code=2) from None
    return out


def _partitions(admin, args: argparse.Namespace, committed: dict) -> list:
    from kafka.structs import TopicPartition
    if args.all_topics:
        return sorted(committed)
    chosen = []
    for topic, wanted in _topic_specs(args.topic):
        meta = require_topic(admin, topic)
        existing = {p["partition_index"] for p in meta["partitions"]}
        for p in wanted if wanted is not None else sorted(existing):
            if p not in existing:
                raise kafka_error(3, f"Partition {topic}-{p} does not exist.")
            chosen.append(TopicPartition(topic, p))
    return chosen


def _lookup(admin, specs: dict) -> dict:
    return {tp: o.offset for tp, o in admin.list_partition_offsets(specs).items()}


def plan_reset(admin, args: argparse.Namespace, committed: dict) -> dict:
    """{TopicPartition: (committed offset or None, new offset)}."""
    from kafka.protocol.consumer import OffsetSpec, OffsetTimestamp
    tps = _partitions(admin, args, committed)
    if not tps:
        return {}
    earliest = _lookup(admin, {tp: OffsetSpec.EARLIEST for tp in tps})
    latest = _lookup(admin, {tp: OffsetSpec.LATEST for tp in tps})
    current = {tp: committed[tp].offset for tp in tps
               if tp in committed and committed[tp].offset >= 0}
    if args.to_datetime is not None:
        found = _lookup(admin, {tp: OffsetTimestamp(args.to_datetime) for tp in tps})
    plan = {}
    for tp in tps:
        if args.to_earliest:
            target = earliest[tp]
        elif args.to_latest:
            target = latest[tp]
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.to_datetime is not None:
            target = found[tp] if found[tp] >= 0 else latest[tp]
        else:  # --to-current or --shift-by: both start from the committed offset
            if tp not in current:
                raise CliError(f"partition {tp.topic}-{tp.partition} has no committed "
                               f"offset to start from")
            target = current[tp] + (args.shift_by or 0)
        plan[tp] = (current.get(tp), _clamp(tp, target, earliest[tp], latest[tp]))
    return plan


def _clamp(tp, offset: int, earliest: int, latest: int) -> int:
    where = f"{tp.topic}-{tp.partition}"
    if offset < earliest:
        print(f"warning: New offset ({offset}) is lower than earliest offset for topic "
              f"partition {where}. Value will be set to {earliest}", file=sys.stderr)
        return earliest
    if offset > latest:
        print(f"warning: New offset ({offset}) is higher than latest offset for topic "
              f"partition {where}. Value will be set to {latest}", file=sys.stderr)
        return latest
    return offset
