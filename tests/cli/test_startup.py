# What each command pays at start-up: `--version` and `--help` import neither a client
# library nor kio, and the light commands (health, dump-log) never load kafka-python or
# hypothesis (which kio pulls in when installed). Checked with `python -X importtime`, which
# names every module a process imports, rather than with a clock.
from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from .conftest import CALL_TIMEOUT


def _imported(*args: str) -> tuple[int, set[str]]:
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "kafkalite", *args],
                       capture_output=True, text=True, timeout=CALL_TIMEOUT)
    modules = {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines()
               if line.startswith("import time:") and "imported package" not in line}
    # a package's own name is listed when it loads; a blocked `import hypothesis.x` lists
    # only hypothesis.x
    return p.returncode, modules


def test_version_prints_the_package_version():
    p = subprocess.run([sys.executable, "-m", "kafkalite", "--version"],
                       capture_output=True, text=True, timeout=CALL_TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"kafkalite {importlib.metadata.version('kafkalite')}\n"


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("topics", "--help"),
                                  ("consume", "--help")], ids=" ".join)
def test_parsing_imports_no_client_library(args):
    code, top = _imported(*args)
    assert code == 0
    assert not top & {"kafka", "kio", "hypothesis", "uvloop", "prometheus_client"}, top


def test_light_commands_skip_kafka_python_and_hypothesis(kafka_broker, tmp_path):
    code, top = _imported("health", "--bootstrap-server", kafka_broker)
    assert code == 0 and "kio" in top
    assert not top & {"kafka", "hypothesis"}, top
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"")
    code, top = _imported("dump-log", str(segment))
    assert code == 0
    assert not top & {"kafka", "hypothesis"}, top
