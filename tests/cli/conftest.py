# The operator CLI is tested as users run it: `python -m kafkalite ...` in a subprocess,
# against the session broker (kafka_broker) or a private one (broker_process).
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass

import pytest

from kafkalite.testing import free_port

CALL_TIMEOUT = 60  # a bound for a hung command, not a timing assertion


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    def json_lines(self) -> list:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def run_cli(*args: str, stdin: str | bytes | None = None) -> Result:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    p = subprocess.run([sys.executable, "-m", "kafkalite", *args], input=data,
                       capture_output=True, timeout=CALL_TIMEOUT,
                       stdin=None if data is not None else subprocess.DEVNULL)
    return Result(p.returncode, p.stdout.decode("utf-8", "replace"),
                  p.stderr.decode("utf-8", "replace"))


def assert_one_error_line(r: Result, code: int, *fragments: str) -> str:
    """A failure is exactly one line on stderr, with a non-zero exit code."""
    assert r.code == code, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def cli(kafka_broker):
    """cli("topics", "list", ...) runs the command against the session broker."""
    def call(*args: str, stdin: str | bytes | None = None, bootstrap: bool = True) -> Result:
        extra = ("--bootstrap-server", kafka_broker) if bootstrap else ()
        return run_cli(*args, *extra, stdin=stdin)
    return call


@pytest.fixture
def new_name():
    return lambda prefix="cli": f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def dead_bootstrap() -> str:
    """An address where nothing listens."""
    return f"127.0.0.1:{free_port()}"
