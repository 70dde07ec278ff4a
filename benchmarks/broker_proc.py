# The broker under test as a process: spawn it, time its startup, and read its CPU and
# memory from /proc.
#
# Startup latency is the time from just before fork/exec to the first Metadata response
# read back on a raw socket. A raw request (not a client library) keeps the client's own
# start-up and reconnect back-off out of the figure; polling every 2 ms bounds the error.
# CPU is utime+stime of the broker process (all its threads) from /proc/<pid>/stat; peak
# memory is VmHWM from /proc/<pid>/status, i.e. the kernel's own high-water mark of RSS,
# which no sampling can miss. A sampler thread also records VmRSS so that each phase can
# report its own peak.
from __future__ import annotations

import io
import os
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass

from kafkalite.testing import BrokerProcess

CLK_TCK = os.sysconf("SC_CLK_TCK")

# The settings the harness needs from a broker it spawns: topics it auto-creates get the
# benchmark's partition count (used only when CreateTopics is not served).
BENCH_SETTINGS = {"num.partitions": "4"}


def metadata_request(correlation_id: int) -> bytes:
    """Metadata v1 asking for no topics: the smallest request that exercises the full
    request path (frame, header, decode, handler, encode)."""
    client_id = b"kafkalite-bench"
    body = struct.pack(">hhih", 3, 1, correlation_id, len(client_id)) + client_id
    body += struct.pack(">i", 0)  # empty topic array: brokers and controller only
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        out += chunk
    return bytes(out)


def probe_metadata(host: str, port: int, timeout: float = 2.0) -> bool:
    """One Metadata round trip; True when a well-formed answer came back."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(metadata_request(7))
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        payload = _recv_exact(s, size)
        return size >= 8 and struct.unpack_from(">i", payload, 0)[0] == 7


@dataclass
class Startup:
    listening_s: float   # first accepted TCP connection
    metadata_s: float    # first answered Metadata request


def wait_until_serving(proc: subprocess.Popen, host: str, port: int, t0: float,
                       timeout: float = 30.0) -> Startup:
    deadline = t0 + timeout
    listening = None
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode} during startup")
        try:
            with socket.create_connection((host, port), timeout=1.0) as s:
                if listening is None:
                    listening = time.perf_counter() - t0
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(metadata_request(1))
                (size,) = struct.unpack(">i", _recv_exact(s, 4))
                _recv_exact(s, size)
                return Startup(listening, time.perf_counter() - t0)
        except OSError:
            time.sleep(0.002)
    raise RuntimeError(f"broker did not answer Metadata within {timeout}s")


def export_revision(repo: str, rev: str) -> tuple[str, str]:
    """Extract kafkalite/ as of git revision `rev` into a temp dir, so that a run measures
    a committed broker rather than a working tree other people are editing. Returns
    (directory, full commit id)."""
    sha = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", f"{rev}^{{commit}}"],
                         capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    tar = subprocess.run(["git", "-C", repo, "archive", "--format=tar", sha, "kafkalite"],
                         capture_output=True, check=True, timeout=60).stdout
    dest = tempfile.mkdtemp(prefix="kafkalite-src-")
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(dest, filter="data")
    return dest, sha


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spawn_broker(settings: dict[str, str] | None = None, log_path: str | None = None,
                 src_dir: str | None = None,
                 cprofile_out: str | None = None) -> tuple[BrokerProcess, Startup]:
    """Start a kafkalite broker on a free 127.0.0.1 port with a fresh temp data dir and
    time it; with `src_dir`, the kafkalite package is imported from there; with
    `cprofile_out`, it runs under benchmarks.cprofile_broker. The caller must call
    .cleanup() on the returned handle."""
    bp = BrokerProcess(settings={**BENCH_SETTINGS, **(settings or {})}, log_path=log_path)
    cmd = bp.command()
    if cprofile_out:
        assert cmd[1:3] == ["-m", "kafkalite"], cmd
        cmd[1:3] = ["-m", "benchmarks.cprofile_broker", cprofile_out]
    path = [src_dir, REPO if cprofile_out else None, os.environ.get("PYTHONPATH")]
    env = dict(os.environ)
    if any(path):
        env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    log = open(bp.log_path, "ab")
    t0 = time.perf_counter()
    bp.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, cwd=src_dir, env=env)
    log.close()
    try:
        startup = wait_until_serving(bp.proc, "127.0.0.1", bp.port, t0)
    except Exception:
        tail = bp.read_log()[-2000:]
        bp.cleanup()
        raise RuntimeError(f"kafkalite did not start:\n{tail}") from None
    return bp, startup


def python_startup_s(runs: int = 3) -> float:
    """The bare interpreter's start-up on this machine (best of `runs`): the floor under
    any Python broker's startup latency."""
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=30)
        best = min(best, time.perf_counter() - t0)
    return best


# --- /proc accounting ---------------------------------------------------------------------

def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of `pid` (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all threads), in seconds."""
    return sum(cpu_times(pid))


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid` in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, val = line.split(":", 1)
                out[key] = int(val.split()[0])
    return out


def harness_cpu_seconds() -> float:
    """CPU of this process (all threads) plus its reaped children (parallel consumers)."""
    import resource
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent not idle since boot (from /proc/stat)."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    guest = sum(vals[8:10])  # already counted in user and nice
    return (sum(vals) - idle - guest) / CLK_TCK


def dirty_mib() -> float:
    """Dirty + Writeback page cache, MiB (/proc/meminfo)."""
    kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(("Dirty:", "Writeback:")):
                kib += int(line.split()[1])
    return kib / 1024


def flush_dir(path: str) -> float:
    """fdatasync every file under `path` (the broker's data dir); returns seconds taken."""
    t0 = time.perf_counter()
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                continue  # deleted meanwhile
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            finally:
                os.close(fd)
    return time.perf_counter() - t0


def settle_writeback(data_dir: str | None = None, max_wait: float = 10.0,
                     limit_mib: float = 256.0) -> dict:
    """Start a test with no writeback of earlier tests' data pending, so that it does not
    pay for its predecessors' I/O. Measured here: below the kernel's background threshold,
    dirty pages are written only once they are 30 s old, i.e. in the middle of a later
    test, where the flusher threads took up to ~1 core. So the broker's data dir (when the
    harness knows it) is fdatasync'ed first; then wait, bounded, for the rest to drain."""
    t0 = time.perf_counter()
    if data_dir:
        flush_dir(data_dir)
    dirty = dirty_mib()
    while dirty > limit_mib and time.perf_counter() - t0 < max_wait:
        time.sleep(0.2)
        dirty = dirty_mib()
    return {"waited_s": round(time.perf_counter() - t0, 1), "dirty_mib": round(dirty)}


def wait_for_quiet(max_wait: float, threshold_cores: float = 0.3,
                   window: float = 0.5) -> dict:
    """On a shared machine, wait (at most `max_wait` s) until the rest of the machine uses
    under `threshold_cores` over a `window`. Returns how long it waited and the last load."""
    t0 = time.perf_counter()
    busy = None
    while True:
        m0, c0 = machine_busy_seconds(), time.process_time()
        time.sleep(window)
        busy = (machine_busy_seconds() - m0 - (time.process_time() - c0)) / window
        if busy < threshold_cores or time.perf_counter() - t0 >= max_wait:
            break
    return {"waited_s": round(time.perf_counter() - t0, 1), "others_cores": round(busy, 2),
            "quiet": busy < threshold_cores}


def measured_phase(mon: "ProcessMonitor | None", data_dir: str | None, quiet_wait: float,
                   fn, *args, **kw) -> dict:
    """Run one test `fn(*args, **kw)` with the broker's CPU and RSS accounted around it, after
    its predecessors' writeback has drained (and, with `quiet_wait`, the machine is idle)."""
    settled = settle_writeback(data_dir)
    quiet = wait_for_quiet(quiet_wait) if quiet_wait > 0 else None
    mark = mon.begin_phase() if mon else None
    r = fn(*args, **kw)
    if mon:
        r["broker"] = mon.end_phase(mark)
    r["writeback_wait"] = settled
    if quiet is not None:
        r["quiet_wait"] = quiet
    return r


class ProcessMonitor:
    """CPU and RSS of one process, overall and per named phase."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid = pid
        self.interval = interval
        self.cpu_start = cpu_seconds(pid)
        self._phase_peak_kib = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                rss = memory_kib(self.pid).get("VmRSS", 0)
            except (OSError, ValueError):
                return
            with self._lock:
                self._phase_peak_kib = max(self._phase_peak_kib, rss)

    def begin_phase(self) -> dict:
        rss = memory_kib(self.pid).get("VmRSS", 0)
        with self._lock:
            self._phase_peak_kib = rss
        return {"cpu": cpu_seconds(self.pid), "sys": cpu_times(self.pid)[1],
                "wall": time.perf_counter(),
                "self": harness_cpu_seconds(), "machine": machine_busy_seconds()}

    def end_phase(self, mark: dict) -> dict:
        cpu = cpu_seconds(self.pid) - mark["cpu"]
        sys_cpu = cpu_times(self.pid)[1] - mark["sys"]
        wall = time.perf_counter() - mark["wall"]
        harness = harness_cpu_seconds() - mark["self"]
        # What the rest of the machine used meanwhile (other people's work on a shared
        # box): a figure taken while this is high measured contention, not kafkalite.
        others = machine_busy_seconds() - mark["machine"] - cpu - harness
        mem = memory_kib(self.pid)
        with self._lock:
            peak = max(self._phase_peak_kib, mem.get("VmRSS", 0))
        return {"broker_cpu_s": round(cpu, 3), "broker_cpu_sys_s": round(sys_cpu, 3),
                "broker_cpu_pct_of_core": round(100.0 * cpu / wall, 1) if wall > 0 else None,
                "other_processes_cores": round(max(others, 0.0) / wall, 2) if wall > 0 else None,
                "broker_rss_mib_end": round(mem.get("VmRSS", 0) / 1024, 1),
                "broker_rss_mib_peak_sampled": round(peak / 1024, 1)}

    def totals(self) -> dict:
        mem = memory_kib(self.pid)
        return {"broker_cpu_s_total": round(cpu_seconds(self.pid) - self.cpu_start, 3),
                "broker_cpu_s_since_exec": round(cpu_seconds(self.pid), 3),
                "broker_rss_mib_peak_vmhwm": round(mem.get("VmHWM", 0) / 1024, 1),
                "broker_rss_mib_end": round(mem.get("VmRSS", 0) / 1024, 1)}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
