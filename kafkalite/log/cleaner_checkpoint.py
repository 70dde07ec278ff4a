# `cleaner-offset-checkpoint` in the data directory, in Kafka's checkpoint format: a version
# line (0), a count line, then one `topic partition offset` line per partition. The offset is
# where each partition's dirty section starts (everything below was cleaned). Written
# atomically (temporary file, fsync, rename, directory fsync), on the cleaner thread.
from __future__ import annotations

import logging
import os

from ..fileio import atomic_write

log = logging.getLogger("kafkalite.log")

NAME = "cleaner-offset-checkpoint"
VERSION = 0


def read_checkpoint(data_dir: str) -> dict[tuple[str, int], int]:
    """The checkpointed offsets; empty when the file is missing. A malformed file is
    ignored with a warning (the cleaner then starts from each log's start, as Kafka)."""
    path = os.path.join(data_dir, NAME)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION:
            raise ValueError(f"unknown version {lines[0]}")
        count = int(lines[1])
        out: dict[tuple[str, int], int] = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError(f"{len(out)} entries, {count} announced")
        return out
    except (IndexError, ValueError) as e:
        log.warning("Ignoring malformed %s: %s", path, e)
        return {}


def write_checkpoint(data_dir: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    atomic_write(os.path.join(data_dir, NAME), ("\n".join(lines) + "\n").encode())
