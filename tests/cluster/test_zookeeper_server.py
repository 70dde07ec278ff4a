# The ZooKeeper test server (tests/helpers/zookeeper.py): a real standalone ZooKeeper on
# 127.0.0.1 started, answering, stopped; and a reason to skip where none can run.
from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import zookeeper as zkh


def test_a_server_of_our_own_starts_answers_and_stops(tmp_path):
    if (reason := zkh.unavailable_reason()) is not None:
        pytest.skip(reason)
    server = zkh.ZooKeeperProcess(data_dir=str(tmp_path))
    try:
        server.start()
        srvr = zkh.four_letter(server.address, "srvr")
        assert "Mode: standalone" in srvr, srvr
        assert "Zookeeper version: 3.8." in srvr, srvr
        # our config, not the shipped one: data under our directory, logs out of the anchor
        assert (tmp_path / "data" / "version-2").is_dir()
        assert f"clientPort={server.port}" in (tmp_path / "zoo.cfg").read_text()
        assert server.stop() is not None and server.proc is None
        assert zkh.four_letter(server.address, "ruok", timeout=0.5) == ""
    finally:
        server.cleanup()


def test_the_session_server_answers(zookeeper):
    host, port = zookeeper.split(":")
    assert host == "127.0.0.1" and int(port) < 32768
    assert zkh.four_letter((host, int(port)), "ruok") == "imok"


def test_no_server_anywhere_gives_a_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(zkh, "anchor_dir", lambda: None)
    monkeypatch.setattr(zkh, "DEBIAN_JAR", str(tmp_path / "absent.jar"))
    reason = zkh.unavailable_reason()
    assert reason is not None and "scripts/setup-zookeeper.sh" in reason


def test_chroots_are_per_test():
    a, b = zkh.chroot_connect("127.0.0.1:2000"), zkh.chroot_connect("127.0.0.1:2000")
    assert a != b and a.startswith("127.0.0.1:2000/kl-")


def test_setup_script_finds_the_server_the_helper_runs():
    # only where a server is already there: elsewhere the script would install one
    if (reason := zkh.unavailable_reason()) is not None:
        pytest.skip(reason)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for _ in range(2):  # idempotent: the second run finds the same and installs nothing
        r = subprocess.run(["bash", os.path.join(root, "scripts", "setup-zookeeper.sh")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "installing" not in r.stdout + r.stderr
        found = zkh.server_command("zoo.cfg")[0]
        assert ("anchor" in r.stdout) == found.endswith("zookeeper-server-start.sh"), r.stdout
