# Shared pieces of the consumer-group tests (no tests here): a consumer worker that runs as
# a subprocess for kafka-python, confluent-kafka or aiokafka, unmodified, and the test-side
# handle that starts, stops (SIGTERM: a clean close) and kills (SIGKILL) it and reads what it
# did. The worker writes JSON lines, each flushed before the next step, so that what a killed
# worker did before its death is on file:
#   {"ev": "assigned", "parts": [...]}     its whole assignment, whenever it changes
#   {"ev": "assign"|"revoke", "parts": []}  rebalance callbacks (confluent-kafka)
#   {"ev": "recs", "p": p, "offs": [...]}   records processed (written before committing)
#   {"ev": "commit", "p": p, "next": n}     after a synchronous commit succeeded
#   {"ev": "error", "msg": "..."}           client errors; {"ev": "closed"} at a clean exit
#
#   python -m tests.integration.test_groups_helpers LIB BOOTSTRAP TOPIC GROUP OUT [JSON opts]
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 6000
HEARTBEAT_MS = 1000


# --- the worker (runs in a subprocess) --------------------------------------------------

class _Out:
    def __init__(self, path: str):
        self.f = open(path, "a", encoding="utf-8")

    def __call__(self, **ev) -> None:
        ev["t"] = time.time()
        self.f.write(json.dumps(ev) + "\n")
        self.f.flush()


class _Tracker:
    """Reports assignment changes and processed records of a poll-based consumer."""

    def __init__(self, out: _Out):
        self.out = out
        self.last: list[int] | None = None

    def polled(self, assigned, batches: dict) -> dict:
        """Log the assignment if it changed and the records polled (before any commit);
        returns {topic-partition: next offset to commit}."""
        cur = sorted(tp.partition for tp in assigned)
        if cur != self.last:
            self.out(ev="assigned", parts=cur)
            self.last = cur
        commit = {}
        for tp, recs in batches.items():
            self.out(ev="recs", p=tp.partition, offs=[r.offset for r in recs])
            commit[tp] = recs[-1].offset + 1
        return commit

    def committed(self, commit: dict) -> None:
        for tp, nxt in commit.items():
            self.out(ev="commit", p=tp.partition, next=nxt)


def _run_kafka_python(a, out: _Out, stop: Callable[[], bool]) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.structs import OffsetAndMetadata
    extra = {"group_instance_id": a["instance"]} if a.get("instance") else {}
    if a.get("strategy"):
        extra["partition_assignment_strategy"] = [
            {"range": RangePartitionAssignor,
             "roundrobin": RoundRobinPartitionAssignor}[a["strategy"]]]
    c = KafkaConsumer(a["topic"], bootstrap_servers=a["bootstrap"], group_id=a["group"],
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      session_timeout_ms=a.get("session_ms", SESSION_MS),
                      heartbeat_interval_ms=HEARTBEAT_MS, client_id=a.get("name", "w"),
                      **extra)
    track = _Tracker(out)
    while not stop():
        commit = track.polled(c.assignment(), c.poll(timeout_ms=200, max_records=500))
        if not commit:
            continue
        try:
            c.commit({tp: OffsetAndMetadata(n, "", -1) for tp, n in commit.items()})
        except Exception as e:  # CommitFailedError and friends: a rebalance got there first
            out(ev="error", msg=f"commit: {e!r}")
            continue
        track.committed(commit)
    c.close()


def _run_confluent(a, out: _Out, stop: Callable[[], bool]) -> None:
    from confluent_kafka import Consumer, TopicPartition
    conf = {"bootstrap.servers": a["bootstrap"], "group.id": a["group"],
            "client.id": a.get("name", "w"), "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": a.get("session_ms", SESSION_MS),
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": a.get("strategy", "range"),
            "error_cb": lambda err: out(ev="error", msg=str(err), fatal=err.fatal())}
    if a.get("instance"):
        conf["group.instance.id"] = a["instance"]
    c = Consumer(conf)
    c.subscribe([a["topic"]],
                on_assign=lambda _c, ps: out(ev="assign", parts=sorted(p.partition for p in ps)),
                on_revoke=lambda _c, ps: out(ev="revoke", parts=sorted(p.partition for p in ps)),
                on_lost=lambda _c, ps: out(ev="lost", parts=sorted(p.partition for p in ps)))
    last = None
    while not stop():
        msgs = c.consume(num_messages=500, timeout=0.2)
        cur = sorted(p.partition for p in c.assignment())
        if cur != last:
            out(ev="assigned", parts=cur)
            last = cur
        by_part: dict[int, list[int]] = {}
        for m in msgs:
            if m.error():
                out(ev="error", msg=str(m.error()), fatal=m.error().fatal())
                continue
            by_part.setdefault(m.partition(), []).append(m.offset())
        if not by_part:
            continue
        for p, offs in by_part.items():
            out(ev="recs", p=p, offs=offs)
        try:
            done = c.commit(offsets=[TopicPartition(a["topic"], p, offs[-1] + 1)
                                     for p, offs in by_part.items()], asynchronous=False)
        except Exception as e:
            out(ev="error", msg=f"commit: {e!r}")
            continue
        for tp in done:
            if tp.error is None:
                out(ev="commit", p=tp.partition, next=tp.offset)
    c.close()


def _run_aiokafka(a, out: _Out, stop: Callable[[], bool]) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    extra = {}
    if a.get("strategy"):
        extra["partition_assignment_strategy"] = (
            {"range": RangePartitionAssignor,
             "roundrobin": RoundRobinPartitionAssignor}[a["strategy"]],)

    async def main() -> None:
        c = AIOKafkaConsumer(a["topic"], bootstrap_servers=a["bootstrap"], group_id=a["group"],
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=a.get("session_ms", SESSION_MS),
                             heartbeat_interval_ms=HEARTBEAT_MS, client_id=a.get("name", "w"),
                             **extra)
        await c.start()
        track = _Tracker(out)
        while not stop():
            data = await c.getmany(timeout_ms=200, max_records=500)
            commit = track.polled(c.assignment(), data)
            if not commit:
                continue
            try:
                await c.commit(commit)
            except Exception as e:
                out(ev="error", msg=f"commit: {e!r}")
                continue
            track.committed(commit)
        await c.stop()

    asyncio.run(main())


RUNNERS = {"kafka-python": _run_kafka_python, "confluent": _run_confluent,
           "aiokafka": _run_aiokafka}


def worker_main(argv: list[str]) -> None:
    lib, bootstrap, topic, group, path = argv[:5]
    opts = json.loads(argv[5]) if len(argv) > 5 else {}
    a = {"bootstrap": bootstrap, "topic": topic, "group": group, **opts}
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    import logging  # the client's own account of its group protocol, for failure reports
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    out = _Out(path)
    out(ev="started", pid=os.getpid())
    deadline = time.monotonic() + opts.get("max_seconds", 240)
    RUNNERS[lib](a, out, lambda: bool(stopping) or time.monotonic() > deadline)
    out(ev="closed")


# --- the test side ----------------------------------------------------------------------

class Worker:
    """A consumer worker subprocess and its event log."""

    def __init__(self, lib: str, bootstrap: str, topic: str, group: str, path: Path,
                 **opts):
        self.path = path
        self.name = opts.setdefault("name", path.stem)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.test_groups_helpers", lib, bootstrap,
             topic, group, str(path), json.dumps(opts)],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(str(path) + ".stderr", "wb"))

    def events(self) -> list[dict]:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by SIGKILL
        return out

    def assignment(self) -> list[int] | None:
        """The latest whole assignment, or None before the first; [] once closed."""
        cur = None
        for e in self.events():
            if e["ev"] == "assigned":
                cur = e["parts"]
            elif e["ev"] == "closed":
                cur = []
        return cur

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
            self.proc.wait()

    def stderr(self) -> str:
        try:
            return Path(str(self.path) + ".stderr").read_text(errors="replace")[-3000:]
        except FileNotFoundError:
            return ""


def wait_for(cond: Callable[[], object], timeout: float, what: str | Callable[[], str],
             interval: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for "
                         f"{what() if callable(what) else what}")


def covers(workers: list[Worker], partitions: int, nonempty: bool = True) -> bool:
    """Whether the workers' latest assignments split 0..partitions-1 exactly, and (with
    `nonempty`) every worker owns something."""
    got = [w.assignment() for w in workers]
    if any(a is None or (nonempty and not a) for a in got):
        return False
    flat = sorted(p for a in got for p in a)  # type: ignore[union-attr]
    return flat == list(range(partitions))


def wait_split(workers: list[Worker], partitions: int, timeout: float, what: str) -> None:
    def check() -> bool:
        for w in workers:
            assert w.alive, f"worker {w.name} died:\n{w.stderr()}"
        return covers(workers, partitions)
    def report() -> str:
        lines = [f"{what}: {[(w.name, w.assignment()) for w in workers]}"]
        for w in workers:
            lines.append(f"--- {w.name}: last events {w.events()[-5:]}\n{w.stderr()[-1500:]}")
        return "\n".join(lines)
    wait_for(check, timeout, report, 0.2)


# --- a raw protocol client (kio encodes requests and decodes responses) -------------------

class RawClient:
    """One connection that sends requests built from kio's schema classes. `send` and
    `recv` are separate so that a test can leave a JoinGroup waiting on one connection
    while it acts on another."""

    def __init__(self, bootstrap: str, client_id: str = "raw-groups"):
        import socket
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.client_id = client_id.encode()
        self.corr = 0
        self.pending: list[tuple[int, int, int]] = []

    @staticmethod
    def schema(api_key: int, version: int):
        """The kio module of a request, to build its nested entities."""
        from kio.index import load_request_schema
        return sys.modules[load_request_schema(api_key, version).__module__]

    def send(self, api_key: int, version: int, **fields) -> None:
        import io
        import struct
        from kio.index import load_request_schema
        from kio.serial import entity_writer
        cls = load_request_schema(api_key, version)
        body = io.BytesIO()
        entity_writer(cls)(body, cls(**fields))
        self.corr += 1
        head = struct.pack(">hhih", api_key, version, self.corr, len(self.client_id))
        head += self.client_id + (b"\x00" if cls.__flexible__ else b"")
        frame = head + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        self.pending.append((api_key, version, self.corr))

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def recv(self):
        import struct
        from kio.index import load_request_schema, load_response_schema
        from kio.serial import entity_reader
        api_key, version, corr = self.pending.pop(0)
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        assert struct.unpack_from(">i", frame)[0] == corr
        pos = 4
        if load_request_schema(api_key, version).__flexible__ and api_key != 18:
            pos += 1  # empty tagged fields of response header v1
        entity, _ = entity_reader(load_response_schema(api_key, version))(frame, pos)
        return entity

    def call(self, api_key: int, version: int, **fields):
        self.send(api_key, version, **fields)
        return self.recv()

    def close(self) -> None:
        self.sock.close()


if __name__ == "__main__":
    worker_main(sys.argv[1:])
