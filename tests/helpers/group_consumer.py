# A consumer group member in a child process for the failover tests (issue 17): confluent-kafka
# subscribed to a topic, enable.auto.commit=false, offsets stored after processing and
# committed synchronously after every batch and when partitions are revoked (the usual
# at-least-once pattern). Everything it does is a line in its report file, read back by
# read_group_reports:
#   rec N PARTITION OFFSET      a record consumed (N: its value, a number)
#   commit PARTITION OFFSET     a commit the coordinator acknowledged
#   commitfail CODE             a commit refused or failed (not counted as committed)
from __future__ import annotations

import time
from typing import Any


def consume_loop(servers: str, topic: str, group: str, out_path: str, stop: Any) -> None:
    """Child process: consume `topic` in `group` until `stop` is set, then commit and close."""
    import confluent_kafka as ck
    out = open(out_path, "a", buffering=1)
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": group,
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                     "heartbeat.interval.ms": 500, "log_level": 2,
                     "error_cb": lambda e: out.write(f"client {e.code()} {e}\n")})

    def commit() -> None:
        try:
            done = c.commit(asynchronous=False)
        except ck.KafkaException as e:
            out.write(f"commitfail {e.args[0].code()}\n")
            return
        for tp in done or []:
            if tp.error is None and tp.offset >= 0:
                out.write(f"commit {tp.partition} {tp.offset}\n")
            elif tp.error is not None:
                out.write(f"commitfail {tp.error.code()}\n")

    # committing what was processed before a partition goes to another member keeps that
    # member from re-reading it (a failure only means re-reads, never a lost commit)
    c.subscribe([topic], on_revoke=lambda consumer, parts: commit())
    try:
        while not stop.is_set():
            msgs = [m for m in c.consume(500, 0.2) if m.error() is None]
            for m in msgs:
                out.write(f"rec {int(m.value())} {m.partition()} {m.offset()}\n")
                try:
                    c.store_offsets(message=m)
                except ck.KafkaException:  # revoked meanwhile: another member reads it
                    pass
            if msgs:
                commit()
        commit()
    finally:
        c.close()
        out.write(f"closed {time.time():.3f}\n")
        out.close()


def read_group_reports(paths: list[str]) -> tuple[set[int], dict[int, int], int, int]:
    """(numbers consumed, {partition: highest acknowledged commit}, records consumed,
    commits refused) over every member's report."""
    numbers: set[int] = set()
    committed: dict[int, int] = {}
    consumed = refused = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if parts[0] == "rec":
                    numbers.add(int(parts[1]))
                    consumed += 1
                elif parts[0] == "commit":
                    p, off = int(parts[1]), int(parts[2])
                    committed[p] = max(committed.get(p, -1), off)
                elif parts[0] == "commitfail":
                    refused += 1
    return numbers, committed, consumed, refused


def consumed_count(paths: list[str]) -> int:
    n = 0
    for path in paths:
        try:
            with open(path) as f:
                n += sum(1 for line in f if line.startswith("rec "))
        except FileNotFoundError:
            pass
    return n


def group_read(servers: str, topic: str, group: str, committed: dict[int, int],
               ends: dict[int, int], timeout: float = 60.0) -> dict[int, list[tuple[int, int]]]:
    """A fresh member of `group` (subscribed, so it starts at the group's commits) reads up
    to `ends` (from `committed`, which only says when to stop): partition -> [(offset, N)]
    (bounded)."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "log_level": 2})
    got: dict[int, list[tuple[int, int]]] = {p: [] for p in ends}
    c.subscribe([topic])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got[m.partition()].append((m.offset(), int(m.value())))
            if all((got[p][-1][0] + 1 if got[p] else committed.get(p, 0)) >= end
                   for p, end in ends.items()):
                break
    finally:
        c.close()
    return got
