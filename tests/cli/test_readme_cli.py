# The README's "Operating it" commands, run as printed, in order, against a fresh broker:
# each line through bash with `kafkalite` being this checkout's `python -m kafkalite`, in the
# directory that holds the broker's `data/`, with KAFKALITE_LISTENERS (the CLI's own default
# bootstrap setting) naming the broker's port instead of localhost:9092.
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from .conftest import CALL_TIMEOUT

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_cli_lines() -> list[str]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Operating it", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "README lost its CLI examples"
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_readme_cli_examples_run_as_printed(broker_process):
    workdir = os.path.dirname(broker_process.data_dir)
    assert os.path.basename(broker_process.data_dir) == "data"
    env = {**os.environ, "PY": sys.executable,
           "KAFKALITE_LISTENERS": f"PLAINTEXT://{broker_process.bootstrap}"}
    outputs = {}
    for line in readme_cli_lines():
        p = subprocess.run(["bash", "-c", 'kafkalite() { "$PY" -m kafkalite "$@"; }\n' + line],
                           cwd=workdir, env=env, capture_output=True, text=True,
                           timeout=CALL_TIMEOUT)
        assert p.returncode == 0, (line, p.stdout, p.stderr)
        outputs[line.split("#")[0].strip()] = p.stdout

    def output(prefix: str) -> str:
        [out] = [o for line, o in outputs.items() if line.startswith(prefix)]
        return out

    records = [json.loads(x) for x in output("kafkalite consume --topic orders --group")
               .splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == [("k1", "hello"), ("k2", "world")]
    assert sorted(output("kafkalite consume --topic orders --from-beginning --exit-at-end")
                  .splitlines()) == [f"{r['partition']}:{r['offset']} {r['key']}={r['value']}"
                                     for r in sorted(records, key=lambda r: r["partition"])]
    assert "my-group" in output("kafkalite groups list")
    assert "my-group" in output("kafkalite groups describe")
    assert output("kafkalite health").startswith("ok: ")
    dump = output("kafkalite dump-log")
    assert "key: k1 payload: hello" in dump and dump.endswith("1 batch, 1 record, 75 bytes\n")
