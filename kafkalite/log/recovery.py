# Opening a partition's segments at start, and recovering them after an unclean shutdown.
#
# Segments are fsynced by the flusher after they roll, and the recovery point (the base of
# the first segment not yet known to be on disk; flusher.RECOVERY_POINT) follows. After a
# crash, every segment that ends past it is CRC-checked and truncated at its first bad
# batch, not only the last one: a power loss may have torn a rolled segment whose fsync
# was still queued. Without a recovery point (a log written before it existed, or a crash
# before the first roll was flushed) every segment is checked, as Kafka does. A swap of
# cleaned segments that a crash interrupted is finished or rolled back first (cleaner_swap).
from __future__ import annotations

import logging
import os

from .cleaner_swap import finish_swaps
from .flusher import RECOVERY_POINT
from .segment import DELETED_SUFFIX, Segment

log = logging.getLogger("kafkalite.log")


def read_offset_file(directory: str, name: str) -> int:
    """The offset a small checkpoint file holds; 0 when it is missing or unreadable."""
    try:
        with open(os.path.join(directory, name)) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def load_segments(directory: str, label: str, index_interval: int,
                  recover: bool) -> list[Segment]:
    """The partition's segments in offset order, the last one active (indexes loaded)."""
    finish_swaps(directory, index_interval)  # before anything reads the segment files
    names = os.listdir(directory)
    bases = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
    for name in names:
        stem, _, ext = name.partition(".")
        if stem.isdigit() and (ext in ("index", "timeindex", "txnindex") and int(stem) not in bases
                               or name.endswith(DELETED_SUFFIX)):
            # an index without a segment, or a deletion the last run did not finish
            os.unlink(os.path.join(directory, name))
    flushed = read_offset_file(directory, RECOVERY_POINT) if recover else 0
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        seg = Segment(directory, base, index_interval)
        last = i == len(bases) - 1
        dropped = seg.load(recover=recover and (last or bases[i + 1] > flushed))
        if dropped:
            log.warning("Recovery of %s: truncated %d bytes of %s at offset %d (torn or "
                        "corrupt tail)", label, dropped, os.path.basename(seg.path),
                        seg.next_offset)
        if not last:
            seg.deactivate()
        if segments and seg.base_offset < segments[-1].next_offset:
            log.warning("Segment %s overlaps its predecessor; ignoring it", seg.path)
            seg.close()
            continue
        segments.append(seg)
    return segments
