# Failures of the command line itself: a bad argument is one line and exit 2 (argparse's
# code); an unreachable broker is one line and exit 1, for every subcommand that connects.
from __future__ import annotations

import pytest

from .conftest import assert_one_error_line, run_cli

BAD_ARGUMENTS = [
    (("topics", "create"), "--topic"),
    (("topics", "create", "--topic", "t", "--partitions", "0"), "--partitions"),
    (("topics", "create", "--topic", "t", "--config", "novalue"), "KEY=VALUE"),
    (("topics", "alter", "--topic", "t"), "nothing to alter"),
    (("topics", "frobnicate"), "invalid choice"),
    (("groups", "reset-offsets", "--group", "g", "--all-topics"), "--to-earliest"),
    (("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest",
      "--to-earliest"), "not allowed with"),
    (("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-datetime",
      "yesterday"), "date-time"),
    (("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest",
      "--execute", "--dry-run"), "not allowed with"),
    (("produce", "--topic", "t", "--acks", "2"), "--acks"),
    (("consume", "--topic", "t", "--max-messages", "0"), "--max-messages"),
    (("consume", "--topic", "t", "--offset", "5"), "--offset needs --partition"),
    (("consume", "--topic", "t", "--partition", "0", "--offset", "soon"), "--offset"),
    (("dump-log",), "PATH"),
    (("health", "--timeout", "-1"), "--timeout"),
    (("no-such-command",), "invalid choice"),
]


@pytest.mark.parametrize("args,fragment", BAD_ARGUMENTS, ids=lambda a: " ".join(a)
                         if isinstance(a, tuple) else None)
def test_bad_arguments(args, fragment, dead_bootstrap):
    # a dead bootstrap: argument errors must come before any attempt to connect
    r = run_cli(*args, "--bootstrap-server", dead_bootstrap) if args[0] not in (
        "dump-log", "no-such-command") else run_cli(*args)
    line = assert_one_error_line(r, 2, "error:", fragment)
    assert line.startswith("kafkalite")
    assert r.out == ""


UNREACHABLE = [
    ("topics", "list"),
    ("topics", "create", "--topic", "t"),
    ("topics", "describe"),
    ("topics", "delete", "--topic", "t"),
    ("groups", "list"),
    ("groups", "describe", "--group", "g"),
    ("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"),
    ("produce", "--topic", "t", "--value", "v"),
    ("consume", "--topic", "t", "--count", "1"),
    ("health",),
]


@pytest.mark.parametrize("args", UNREACHABLE, ids=" ".join)
def test_unreachable_broker(args, dead_bootstrap):
    r = run_cli(*args, "--bootstrap-server", dead_bootstrap)
    assert_one_error_line(r, 1, "error:", dead_bootstrap, "refused")
    assert r.out == ""


def test_help_lists_every_command():
    r = run_cli("--help")
    assert r.code == 0
    for command in ("serve", "topics", "groups", "produce", "consume", "health", "dump-log"):
        assert command in r.out
