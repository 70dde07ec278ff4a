"""Operator commands of the `kafkalite` CLI: one module per subcommand group.

Each module has `register(subparsers)`. Modules import kafka-python and kio only inside
their commands, so building the parser stays cheap (`kafkalite health` runs as a Docker
HEALTHCHECK every few seconds).
"""
from __future__ import annotations

import argparse

from . import acls, consume, dump_log, groups, health, produce, topics, transactions, users

MODULES = (topics, groups, produce, consume, health, dump_log, transactions, acls, users)


def register(sub: argparse._SubParsersAction) -> None:
    for module in MODULES:
        module.register(sub)
