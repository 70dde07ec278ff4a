# Kafka's `replication-offset-checkpoint` in the data directory's root: the high watermark
# of every replicated partition, which a broker restarts from (before its leader tells it
# more). The text is Kafka's OffsetCheckpointFile, as a 3.8 broker writes it:
#
#   0\n<count>\n<topic> <partition> <offset>\n...
#
# Written atomically (a crash leaves the old or the new file) on the flusher thread.
from __future__ import annotations

import logging
import os
from typing import Iterable

log = logging.getLogger("kafkalite.log")

NAME = "replication-offset-checkpoint"
VERSION = 0


def format_checkpoint(entries: Iterable[tuple[str, int, int]]) -> bytes:
    """The file's bytes for (topic, partition, offset) entries, in partition order."""
    lines = [f"{t} {p} {o}" for t, p, o in sorted(entries)]
    return "".join(f"{line}\n" for line in [str(VERSION), str(len(lines))] + lines).encode()


def parse_checkpoint(text: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset of a checkpoint's text. Raises ValueError."""
    lines = text.splitlines()
    if len(lines) < 2 or int(lines[0]) != VERSION:
        raise ValueError(f"unknown version or truncated header: {lines[:2]!r}")
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    if len(out) != int(lines[1]):
        raise ValueError(f"{len(out)} entries, {lines[1]} announced")
    return out


def read_checkpoint(data_dir: str) -> dict[tuple[str, int], int]:
    """The data directory's high watermarks; none when the file is missing or malformed
    (then each replicated partition starts from its log start, as Kafka from 0)."""
    path = os.path.join(data_dir, NAME)
    try:
        with open(path, encoding="utf-8") as f:
            return parse_checkpoint(f.read())
    except FileNotFoundError:
        return {}
    except (ValueError, UnicodeDecodeError) as e:
        log.warning("Ignoring malformed %s: %s", path, e)
        return {}
