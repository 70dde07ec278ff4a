# scripts/test.sh, the README's second command, run on a small project of its own: it names
# each test as it runs (the suite holds tests that take minutes) and keeps its exit-code
# contract (pytest's code, "no tests collected" a failure). The installation step is skipped
# (KAFKALITE_TEST_NO_SETUP=1) with a .venv/bin/python that runs this interpreter.
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def project(tmp_path: Path, tests: str | None) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test.sh", tmp_path / "scripts" / "test.sh")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    # refuses pip, so that a script that installed anyway could not touch this interpreter
    python.write_text('#!/bin/sh\ncase "$*" in *"-m pip"*) echo "no pip here" >&2; exit 3;; esac\n'
                      f'exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    if tests is not None:
        (tmp_path / "test_small.py").write_text(tests)
    return tmp_path


def run(directory: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAFKALITE_TEST_NO_SETUP": "1"}
    return subprocess.run(["bash", "scripts/test.sh", "-p", "no:kafkalite"], cwd=directory,
                          env=env, capture_output=True, text=True, timeout=120)


def test_each_test_is_named_as_it_runs(tmp_path):
    r = run(project(tmp_path, "def test_first():\n    pass\n\ndef test_second():\n    pass\n"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_small.py::test_first PASSED" in r.stdout
    assert "test_small.py::test_second PASSED" in r.stdout
    assert "slowest" in r.stdout  # --durations


def test_a_failing_test_fails_the_script(tmp_path):
    r = run(project(tmp_path, "def test_broken():\n    assert False\n"))
    assert r.returncode == 1
    assert "test_small.py::test_broken FAILED" in r.stdout


def test_no_tests_is_a_failure(tmp_path):
    r = run(project(tmp_path, None))
    assert r.returncode == 1
    assert "pytest collected no tests: failing" in r.stderr
