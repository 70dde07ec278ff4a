# Network partitions for the cluster tests (issue 17): one Linux network namespace per broker,
# each with its own address, joined by a bridge of the test's own; partitions are iptables
# DROP rules inside the namespaces.
#
#   with Partitions(["b1", "b2", "b3"]) as net:     # skips where namespaces cannot be made
#       addr = net.address("b1")                    # "10.231.N.11"
#       BrokerProcess(host=addr, prefix=net.prefix("b1"))
#       net.isolate("b1"); net.cut("b2", "b3"); net.heal()
#
# The layout: a bridge `kp<pid>-<n>b` holding the subnet's .1 in the root namespace (where
# ZooKeeper and the test's own clients run, bound to that address), and per name a namespace
# `kp<pid>-<n>-<name>` whose veth end has .11, .12, ... The bridge is not routed anywhere
# (no default route in the namespaces, no forwarding or NAT in the root one): traffic stays
# on this machine, which is how the "traffic stays on loopback" rule is read here.
#
# A partition drops packets silently (DROP, not REJECT), as a cable pulled: TCP retransmits,
# ZooKeeper sessions time out, and connections that outlive the partition carry on after
# heal(). The rules live inside the namespaces (a namespace has its own netfilter tables),
# so the host's firewall is never touched and deleting a namespace deletes its rules.
#
# Cleanup always runs (the context manager; `close()` is idempotent), and every start sweeps
# what a dead test process left behind: names carry the creating process's pid, so a sweep
# removes only namespaces and links of processes no longer alive.
from __future__ import annotations

import ipaddress
import itertools
import os
import re
import subprocess
from typing import Sequence

import pytest

NAME = re.compile(r"^kp(\d+)-")
SUPERNET = "10.231"  # private (RFC 1918); a /24 per test, the first one no address uses
_serial = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                          check=check)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep() -> list[str]:
    """Delete namespaces and links whose creating process is gone; returns their names."""
    removed = []
    spaces = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
              if line.strip()]
    links = re.findall(r"^\d+: ([^:@\s]+)", _ip("-o", "link", "show", check=False).stdout,
                       re.M)
    for name in spaces + links:
        m = NAME.match(name)
        if m and not _alive(int(m.group(1))):
            _ip("netns", "del", name, check=False) if name in spaces else \
                _ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    used = _ip("-4", "-o", "addr", "show", check=False).stdout
    # from a place of this process's own: two test runs starting at once rarely pick alike
    for n in ((os.getpid() + i) % 256 for i in range(256)):
        if f" {SUPERNET}.{n}." not in used:
            return ipaddress.ip_network(f"{SUPERNET}.{n}.0/24")
    raise RuntimeError(f"no free /24 in {SUPERNET}.0.0/16")


class Partitions:
    """A bridge and one namespace per name; isolate / cut / heal; close() removes it all."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self.tag = f"kp{os.getpid()}-{next(_serial)}"
        self.bridge = f"{self.tag}b"
        self.net = None
        self.made_spaces: list[str] = []
        self.made_links: list[str] = []

    # --- layout ------------------------------------------------------------------------------

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        return str(self.net[11 + self.names.index(name)])

    @property
    def bridge_address(self) -> str:
        """The root namespace's address on the bridge (ZooKeeper, the test's clients)."""
        return str(self.net[1])

    def prefix(self, name: str) -> list[str]:
        """The command prefix that runs a program inside `name`'s namespace (it execs it:
        the process started is the program, so signals reach it)."""
        return ["ip", "netns", "exec", self.namespace(name)]

    def run_in(self, name: str, argv: Sequence[str], **popen) -> subprocess.Popen:
        """Spawn `argv` inside `name`'s namespace."""
        return subprocess.Popen([*self.prefix(name), *argv], **popen)

    def open(self) -> "Partitions":
        sweep()
        self.net = _free_subnet()
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self.made_links.append(self.bridge)
            _ip("addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, name in enumerate(self.names):
                ns, host_end, ns_end = self.namespace(name), f"{self.tag}h{i}", f"{self.tag}p{i}"
                _ip("netns", "add", ns)
                self.made_spaces.append(ns)
                _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
                self.made_links.append(host_end)
                _ip("link", "set", ns_end, "netns", ns)
                _ip("link", "set", host_end, "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", ns_end)
                _ip("-n", ns, "link", "set", ns_end, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            self.heal()  # also proves iptables works in a namespace here
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for ns in self.made_spaces:
            _ip("netns", "del", ns, check=False)
        for link in self.made_links:  # a veth goes with its namespace, sometimes later
            _ip("link", "del", link, check=False)
        self.made_spaces.clear()
        self.made_links.clear()

    def __enter__(self) -> "Partitions":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- partitions --------------------------------------------------------------------------

    def _iptables(self, name: str, *rule: str) -> None:
        subprocess.run([*self.prefix(name), "iptables", "-w", *rule], check=True,
                       capture_output=True, timeout=30)

    def isolate(self, name: str) -> None:
        """`name` reaches nothing and nothing reaches it (its own loopback excepted, so that
        a client inside its namespace still talks to it)."""
        self._iptables(name, "-A", "INPUT", "!", "-i", "lo", "-j", "DROP")
        self._iptables(name, "-A", "OUTPUT", "!", "-o", "lo", "-j", "DROP")

    def cut(self, a: str, b: str) -> None:
        """A partial partition: a and b no longer reach each other; both reach the rest."""
        for here, there in ((a, b), (b, a)):
            self._iptables(here, "-A", "INPUT", "-s", self.address(there), "-j", "DROP")
            self._iptables(here, "-A", "OUTPUT", "-d", self.address(there), "-j", "DROP")

    def heal(self) -> None:
        """Every rule gone: the full mesh again."""
        for name in self.names:
            self._iptables(name, "-F", "INPUT")
            self._iptables(name, "-F", "OUTPUT")


def partitions(names: Sequence[str]) -> Partitions:
    """Partitions(names), opened; skips the test with the reason where the machine cannot
    make them (not root, no CAP_NET_ADMIN, no bridge or iptables in a namespace)."""
    if os.geteuid() != 0:
        pytest.skip("network partitions need root (CAP_NET_ADMIN) for network namespaces")
    try:
        return Partitions(names).open()
    except (OSError, subprocess.SubprocessError) as e:
        detail = (getattr(e, "stderr", None) or str(e)).strip()
        pytest.skip("cannot make network namespaces with a bridge and iptables here "
                    f"(CAP_NET_ADMIN?): {detail}")
