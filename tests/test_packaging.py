# The package as pip builds it, from a copy of the sources (a build writes into its source
# directory): no setuptools deprecation in the build's output, the licence as SPDX metadata.
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_wheel_builds_without_setuptools_deprecations(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(os.path.join(ROOT, "kafkalite"), src / "kafkalite",
                    ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v",
                        "-w", str(tmp_path / "dist"), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    output = r.stdout + r.stderr
    assert "SetuptoolsDeprecationWarning" not in output
    assert "project.license" not in output
    (wheel,) = (tmp_path / "dist").glob("kafkalite-*.whl")
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith("/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata

