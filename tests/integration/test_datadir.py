# The data directory through real `kafkalite serve` processes: a second broker on the same
# directory is refused with one line while the first keeps serving; a directory that is not
# kafkalite's is refused untouched; in a kafkalite directory, what is not a known partition
# survives restarts (user files, partitions whose topic metadata file is lost), and only the
# leftovers of deleted topics are removed.
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import uuid

from kafkalite.log.manager import CLEAN_SHUTDOWN_MARKER
from kafkalite.testing import free_port

from tests.helpers.dirtree import tree, user_files, wait_gone
from tests.helpers.kclients import consume, produce


def serve(data_dir, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """`kafkalite serve` on `data_dir`, expected to refuse and exit by itself."""
    return subprocess.run(
        [sys.executable, "-m", "kafkalite", "serve",
         "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--set", f"log.dirs={data_dir}"],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_second_broker_on_the_same_directory_exits_and_the_first_keeps_serving(
        broker_process):
    bp = broker_process
    record = [(0, b"k", b"acknowledged before", [], None)]
    assert produce("confluent", bp.bootstrap, "locked", record) == [(0, 0)]
    r = serve(bp.data_dir)
    assert r.returncode != 0
    line = one_line(r.stderr)
    assert bp.data_dir in line and "lock" in line
    assert not os.path.exists(os.path.join(bp.data_dir, CLEAN_SHUTDOWN_MARKER))
    got = consume("kafka-python", bp.bootstrap, "locked", {0: 1})
    assert [(o, k, v) for _p, o, k, v, *_ in got[0]] == [(0, b"k", b"acknowledged before")]
    bp.restart(hard=True)  # recovery, as a crash would need it, keeps the record
    got = consume("confluent", bp.bootstrap, "locked", {0: 1})
    assert [(o, k, v) for _p, o, k, v, *_ in got[0]] == [(0, b"k", b"acknowledged before")]


def test_a_directory_that_is_not_kafkalites_is_refused_untouched(tmp_path):
    user_files(tmp_path)
    before = tree(tmp_path)
    r = serve(tmp_path)
    assert r.returncode != 0
    line = one_line(r.stderr)
    assert str(tmp_path) in line and "meta.properties" in line
    assert tree(tmp_path) == before


def test_unknown_entries_and_orphaned_partitions_survive_restarts(broker_process):
    bp = broker_process
    data = bp.data_dir
    for topic in ("kept", "orphaned"):
        produce("kafka-python", bp.bootstrap, topic, [(0, b"k", topic.encode(), [], None)])
    bp.stop()
    tmp = pathlib.Path(data)
    user_files(tmp)
    os.unlink(os.path.join(data, ".kafkalite", "topics", "orphaned.json"))
    leftover = os.path.join(data, f"gone-0.{uuid.uuid4().hex}-delete")
    os.makedirs(leftover)
    with open(os.path.join(leftover, "00000000000000000000.log"), "wb") as f:
        f.write(b"records of a topic deleted just before a crash")
    before = {k: v for k, v in tree(tmp).items() if not k.startswith(("gone-", "."))}
    assert "orphaned-0/00000000000000000000.log" in before
    mark = len(bp.read_log())
    bp.start()
    got = consume("confluent", bp.bootstrap, "kept", {0: 1})
    assert got[0][0][3] == b"kept"
    assert wait_gone(leftover)
    after = tree(tmp)
    assert {k: after.get(k) for k in before if not k.startswith("kept-")} == \
        {k: v for k, v in before.items() if not k.startswith("kept-")}
    log = bp.read_log()[mark:]
    assert "orphaned-0 alone" in log and "photos alone" in log
