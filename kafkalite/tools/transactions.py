# `kafkalite transactions list|describe|abort`: kafka-transactions.sh over the public protocol
# (ListTransactions on every broker; FindCoordinator + DescribeTransactions; WriteTxnMarkers),
# through kafka-python's admin client, so it works against any Kafka broker.
#
# abort is kafka-transactions.sh's "abort a hanging transaction" in its explicit form: an ABORT
# marker for the named producer id/epoch written into one partition by its leader
# (WriteTxnMarkers, coordinator epoch -1 unless given; DescribeProducers shows all three).
from __future__ import annotations

import argparse

from .common import add_command, describe_exception, open_admin
from .output import emit_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("transactions", help="list, describe, abort transactions")
    tsub = p.add_subparsers(dest="transactions_command", required=True, metavar="ACTION")
    s = add_command(tsub, "list", _list, "transactions known to the coordinators")
    s.add_argument("--state", action="append", default=[], help="only this state (repeatable)")
    s.add_argument("--producer-id", type=int, action="append", default=[],
                   help="only this producer id (repeatable)")
    s.add_argument("--duration-ms", type=int, default=None,
                   help="only transactions open longer than this")
    s = add_command(tsub, "describe", _describe, "one transactional id's state")
    s.add_argument("--transactional-id", required=True)
    s = add_command(tsub, "abort", _abort, "write an ABORT marker for a hanging transaction")
    s.add_argument("--topic", required=True)
    s.add_argument("--partition", type=int, required=True)
    s.add_argument("--producer-id", type=int, required=True)
    s.add_argument("--producer-epoch", type=int, required=True)
    s.add_argument("--coordinator-epoch", type=int, default=-1)


def _state(value) -> str:
    return getattr(value, "value", value)


def _list(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        by_broker = admin.list_transactions(producer_id_filters=args.producer_id or None,
                                            state_filters=args.state or None,
                                            duration_filter_ms=args.duration_ms)
    except Exception as e:
        raise describe_exception(e) from None
    finally:
        admin.close()
    rows = sorted(({"transactional_id": t.transactional_id, "coordinator": node,
                    "producer_id": t.producer_id, "state": _state(t.state)}
                   for node, txns in by_broker.items() for t in txns),
                  key=lambda r: r["transactional_id"])
    if args.json:
        emit_json(rows)
    else:
        table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"],
              [(r["transactional_id"], r["coordinator"], r["producer_id"], r["state"])
               for r in rows])
    return 0


def _describe(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    except Exception as e:
        raise describe_exception(e) from None
    finally:
        admin.close()
    row = {"coordinator": d.coordinator_id, "transactional_id": args.transactional_id,
           "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
           "state": _state(d.state), "timeout_ms": d.transaction_timeout_ms,
           "start_time_ms": d.transaction_start_time_ms,
           "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions)}
    if args.json:
        emit_json(row)
    else:
        table(["COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE",
               "TIMEOUT-MS", "START-TIME-MS", "PARTITIONS"],
              [(row["coordinator"], row["transactional_id"], row["producer_id"],
                row["producer_epoch"], row["state"], row["timeout_ms"], row["start_time_ms"],
                ",".join(row["partitions"]))])
    return 0


def _abort(args: argparse.Namespace) -> int:
    from kafka.admin._transactions import AbortTransactionSpec
    from kafka.structs import TopicPartition
    admin = open_admin(args)
    try:
        admin.abort_transaction(AbortTransactionSpec(
            TopicPartition(args.topic, args.partition), args.producer_id, args.producer_epoch,
            args.coordinator_epoch))
    except Exception as e:
        raise describe_exception(e) from None
    finally:
        admin.close()
    print(f"Aborted the transaction of producer {args.producer_id} in "
          f"{args.topic}-{args.partition}")
    return 0
