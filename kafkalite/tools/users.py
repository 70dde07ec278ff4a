# `kafkalite users list|add|delete`: SCRAM users, as `kafka-configs.sh --entity-type users
# --alter --add-config 'SCRAM-SHA-256=[iterations=4096,password=...]'` does it, over the
# public protocol (DescribeUserScramCredentials, AlterUserScramCredentials: the client salts
# and hashes the password, the broker never sees it). `--command-config` (common.py, as every
# command's) logs in to a SASL or TLS listener.
from __future__ import annotations

import argparse
from typing import Any

from .common import CliError, add_command, describe_exception, open_admin
from .output import emit_json, table

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("users", help="list, add, delete SCRAM users")
    usub = p.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    s = add_command(usub, "list", _list, "SCRAM users and their mechanisms")
    s.add_argument("--user", action="append", default=[], help="only this user (repeatable)")
    _common(s)
    s = add_command(usub, "add", _add, "add a SCRAM user, or change its password")
    s.add_argument("--user", required=True)
    s.add_argument("--password", required=True)
    s.add_argument("--iterations", type=int, default=4096, help="4096-16384 (default 4096)")
    _common(s)
    s = add_command(usub, "delete", _delete, "delete a SCRAM user's credentials")
    s.add_argument("--user", required=True)
    _common(s)


def _common(s: argparse.ArgumentParser) -> None:
    s.add_argument("--mechanism", action="append", choices=MECHANISMS, default=[],
                   help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both)")



def _mechanisms(args: argparse.Namespace):
    from kafka.admin import ScramMechanism
    return [ScramMechanism[m.replace("-", "_")] for m in (args.mechanism or MECHANISMS)]


def _run(args: argparse.Namespace, fn):
    admin = open_admin(args)
    try:
        return fn(admin)
    except CliError:
        raise
    except Exception as e:
        raise describe_exception(e) from None
    finally:
        admin.close()


def _list(args: argparse.Namespace) -> int:
    found = _run(args, lambda a: a.describe_user_scram_credentials(args.user or None))
    wanted = set(args.mechanism)
    rows = []
    for user, info in sorted(found.items()):
        if info["error"]:
            raise CliError(info["error"], "RESOURCE_NOT_FOUND")
        # by name: Kafka's order of a user's mechanisms varies between its runs
        for c in sorted(info["credential_infos"], key=lambda c: c["mechanism"].name):
            name = c["mechanism"].name.replace("_", "-")
            if not wanted or name in wanted:
                rows.append({"user": user, "mechanism": name, "iterations": c["iterations"]})
    if args.json:
        emit_json(rows)
    else:
        table(["USER", "MECHANISM", "ITERATIONS"],
              [(r["user"], r["mechanism"], r["iterations"]) for r in rows])
    return 0


def _alter(args: argparse.Namespace, make) -> None:
    # one request per mechanism: a user named twice in one request is DUPLICATE_RESOURCE
    def go(admin):
        for mech in _mechanisms(args):
            error = admin.alter_user_scram_credentials([make(mech)]).get(args.user)
            if error:
                raise CliError(error)
    _run(args, go)


def _add(args: argparse.Namespace) -> int:
    from kafka.admin import UserScramCredentialUpsertion
    _alter(args, lambda m: UserScramCredentialUpsertion(args.user, m, args.password,
                                                        iterations=args.iterations))
    _done(args, "added", "Added SCRAM credentials for user")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from kafka.admin import UserScramCredentialDeletion
    _alter(args, lambda m: UserScramCredentialDeletion(args.user, m))
    _done(args, "deleted", "Deleted SCRAM credentials of user")
    return 0


def _done(args: argparse.Namespace, key: str, text: str) -> None:
    mechs = args.mechanism or list(MECHANISMS)
    if args.json:
        emit_json({key: args.user, "mechanisms": mechs})
    else:
        print(f"{text} {args.user} ({', '.join(mechs)}).")
