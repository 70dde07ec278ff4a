# Swapping cleaned segments in, as Kafka's LogCleaner + UnifiedLog.replaceSegments do, and
# finishing or rolling back a swap that a crash interrupted.
#
# On the cleaner thread: a group of old segments [b0, next) is rewritten into one segment
# `<b0>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`, `.txnindex.cleaned`), which
# is fsynced, then renamed to `.swap` (log first) and the directory fsynced: from here the
# swap is decided. On the event loop (replace_segments): the old segments' files are renamed
# to `.deleted` (kept open: a fetch holding one keeps reading it), the `.swap` files to their
# live names (log first), and the log's segment list changes; the directory is fsynced on
# the flusher and the old files are closed and unlinked file.delete.delay.ms later.
#
# Recovery (finish_swaps, before the segments are opened): `.cleaned` files are deleted
# unless their stem's `.log.swap` exists (then they are complete and join the swap); for a
# `.log.swap` at b0, every live segment with a base offset in [b0, its next offset) is an
# old one and is deleted, then the `.swap` files get their live names; `.swap` indexes
# left without their `.log.swap` belong to a log already renamed and are renamed too.
# The cleaned segment always ends with the old group's last batch (kept empty if need be),
# so its next offset names the replaced range exactly.
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from .flusher import fsync_all, open_dir
from .segment import DELETED_SUFFIX, Segment

if TYPE_CHECKING:
    from .partition import PartitionLog

log = logging.getLogger("kafkalite.log")

CLEANED = ".cleaned"
SWAP = ".swap"


def seal_cleaned(seg: Segment) -> None:
    """Make the written `.cleaned` segment durable and rename it to `.swap` (cleaner
    thread): after this, a crash completes the swap."""
    seg.flush()
    seg.deactivate()
    fsync_all(seg.sync_handles())  # the time index's final entry
    seg.rename(SWAP)
    fsync_all([open_dir(seg.directory)])


def replace_segments(p: "PartitionLog", old: list[Segment], new: Segment) -> list[Segment]:
    """Put `new` (named `.swap`) in the place of `old` in the partition's log (event loop).
    Returns the old segments, renamed `.deleted` but still open, for a later close; raises
    ValueError when they are no longer the log's (the `.swap` files are then removed)."""
    i = next((n for n, s in enumerate(p.segments) if s is old[0]), -1)
    if i < 0 or p.segments[i:i + len(old)] != old or i + len(old) >= len(p.segments):
        discard(new)
        raise ValueError(f"{p.topic}-{p.partition}: segments changed during cleaning")
    for seg in old:
        seg.rename(DELETED_SUFFIX)
    new.rename("")
    p.segments[i:i + len(old)] = [new]
    p._bases = [s.base_offset for s in p.segments]
    p.durability.fsync(new, lambda: [open_dir(p.directory)])  # the renames, off the loop
    return old


def discard(seg: Segment) -> None:
    try:
        seg.delete()
    except OSError as e:
        log.warning("Removing %s failed: %s", seg.path, e)


def finish_swaps(directory: str, index_interval: int) -> None:
    """Complete or roll back the cleaner's swaps that a crash interrupted (recovery)."""
    names = os.listdir(directory)
    swaps = {n.partition(".")[0] for n in names if n.endswith(".log" + SWAP)}
    for name in names:
        stem = name.partition(".")[0]
        if name.endswith(CLEANED):
            path = os.path.join(directory, name)
            if stem in swaps:
                os.rename(path, path[:-len(CLEANED)] + SWAP)
            else:
                log.warning("Removing %s: a cleaning that did not finish", path)
                os.unlink(path)
    for stem in sorted(swaps):
        base = int(stem)
        seg = Segment(directory, base, index_interval, SWAP)
        try:
            seg.load(recover=True)
            end = seg.next_offset
        finally:
            seg.close()
        for name in os.listdir(directory):
            s, _, ext = name.partition(".")
            if s.isdigit() and base <= int(s) < end and not ext.endswith(SWAP) \
                    and ext in ("log", "index", "timeindex", "txnindex"):
                log.warning("Completing the swap of %s: removing replaced %s", stem, name)
                os.unlink(os.path.join(directory, name))
    for name in sorted(os.listdir(directory)):
        if name.endswith(SWAP):
            path = os.path.join(directory, name)
            os.replace(path, path[:-len(SWAP)])
    if swaps:
        fsync_all([open_dir(directory)])
