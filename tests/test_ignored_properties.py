"""Properties kafkalite accepts and describes but does not apply (issue 10 item 7): a value
that matters logs one warning at start naming each of them, and COMPATIBILITY.md lists every
one, broker property and topic config alike."""
from __future__ import annotations

import os

from kafkalite.config import IGNORED
from kafkalite.testing import BrokerProcess
from kafkalite.topic_config import IGNORED_TOPIC_CONFIGS

WARNING = "Accepted but not applied by kafkalite"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if WARNING in line]


def test_one_warning_at_start_names_each_ignored_setting(tmp_path):
    settings = {"fetch.max.bytes": "1000", "socket.send.buffer.bytes": "65536",
                "num.io.threads": "16",
                "log.roll.jitter.ms": "0"}  # no jitter is what kafkalite does anyway
    with BrokerProcess(data_dir=str(tmp_path / "set"), settings=settings) as bp:
        pass
    lines = _warnings(bp.read_log())
    assert len(lines) == 1, lines
    for named in ("fetch.max.bytes=1000", "socket.send.buffer.bytes=65536",
                  "num.io.threads=16"):
        assert named in lines[0]
    assert "log.roll.jitter.ms" not in lines[0]

    with BrokerProcess(data_dir=str(tmp_path / "defaults")) as bp:
        pass
    assert _warnings(bp.read_log()) == []


def test_compatibility_md_lists_every_ignored_property():
    with open(os.path.join(ROOT, "COMPATIBILITY.md"), encoding="utf-8") as f:
        text = f.read()
    missing = [name for name in [*IGNORED, *IGNORED_TOPIC_CONFIGS] if f"`{name}`" not in text]
    assert missing == []
