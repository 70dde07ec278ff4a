# The README's pytest-plugin example, extracted from README.md and run as a user would run
# it: in a fresh pytest process that picks up kafkalite's plugin through its entry point.
from __future__ import annotations

import os
import re
import shlex
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


def _security_blocks() -> tuple[str, str, str]:
    """The README's security example: server.properties, admin.properties and the commands."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Security", 1)[1].split("\n## ", 1)[0]
    props = re.findall(r"```properties\n(# server\.properties\n.*?)```\n+```properties\n"
                       r"(# admin\.properties.*?)```\n+```bash\n(.*?)```", section, re.S)
    assert props, "README lost its security example"
    return props[0]


def test_readme_security_example_runs(tmp_path):
    """The example as written (certificate paths and ports aside): the broker starts from the
    server.properties text, the admin (a bootstrap SCRAM user) logs in through its
    --command-config file, creates alice, a topic and a PREFIXED ACL, and alice produces."""
    from kafkalite.testing import BrokerProcess
    from tests.helpers.certs import make_pki
    from tests.helpers.real_kafka import free_port_pair
    pki = make_pki(str(tmp_path / "pki"))
    plain, sasl = free_port_pair(), free_port_pair()
    while sasl in (plain, plain + 1):
        sasl = free_port_pair()

    def local(text: str) -> str:
        return (text.replace("/certs/server-keystore.pem", pki.server_keystore)
                .replace("/certs/ca.pem", pki.ca).replace(":9094", f":{sasl}")
                .replace(":9092", f":{plain}"))

    server, admin, commands = (local(block) for block in _security_blocks())
    (tmp_path / "server.properties").write_text(server)
    (tmp_path / "admin.properties").write_text(admin)
    (tmp_path / "alice.properties").write_text(
        admin.replace('"admin"', '"alice"').replace('"admin-secret"', '"alice-secret"'))

    class FromConfig(BrokerProcess):
        def command(self) -> list[str]:
            return [sys.executable, "-m", "kafkalite", "serve", "--config",
                    str(tmp_path / "server.properties"), "--set", f"log.dirs={self.data_dir}"]

    broker = FromConfig(data_dir=str(tmp_path / "data"), port=plain)
    broker.start()
    try:
        env: dict[str, str] = {}
        lines = commands.replace("\\\n", " ").splitlines()
        ran = 0
        for line in lines:
            if line.startswith("kafkalite serve"):
                continue
            if line.startswith("export "):
                name, _, value = line[len("export "):].partition("=")
                env[name] = shlex.split(value)[0]
                continue
            for name, value in env.items():
                line = line.replace("$" + name, value)
            stdin = None
            if "|" in line:
                feed, line = (part.strip() for part in line.split("|", 1))
                stdin = shlex.split(feed)[1] + "\n"
            args = shlex.split(line)
            assert args[0] == "kafkalite", line
            r = subprocess.run([sys.executable, "-m", "kafkalite", *args[1:]], cwd=tmp_path,
                               input=stdin, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (line, r.stdout, r.stderr)
            ran += 1
            if args[1:3] == ["acls", "list"]:
                assert "User:alice" in r.stdout and "orders." in r.stdout, r.stdout
        assert ran == 5
    finally:
        broker.cleanup()
