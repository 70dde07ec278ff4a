# The README's pytest-plugin example, extracted from README.md and run as a user would run
# it: in a fresh pytest process that picks up kafkalite's plugin through its entry point.
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_example() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Using it in your tests", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README lost its pytest example"
    return match.group(1)


def test_readme_example_runs_with_the_plugin_and_warns_about_nothing(tmp_path):
    (tmp_path / "test_example.py").write_text(readme_example())
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               str(tmp_path / "test_example.py")]
    r = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    # as strict as a user's CI may be: a DeprecationWarning anywhere fails the run
    r = subprocess.run(command + ["-W", "error::DeprecationWarning"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
