# The log cleaner (Kafka's LogCleaner and LogCleanerManager): compaction of every partition
# whose cleanup.policy holds `compact`, on log.cleaner.threads threads, off the event loop.
#
# Which partition: the dirtiest one (dirty bytes after the cleaner checkpoint / all bytes)
# past its min.cleanable.dirty.ratio, or one whose oldest dirty record is older than
# max.compaction.lag.ms, or one holding a delete horizon that has passed. Never the active
# segment, nothing past the last stable offset, nothing newer than min.compaction.lag.ms.
# The cleaning itself is cleaner_core.py's; where each partition's dirty section starts is
# kept in `cleaner-offset-checkpoint` (cleaner_checkpoint.py).
#
# Threads: a cleaner thread reads closed segments through descriptors of its own and writes
# the cleaned segments; the event loop alone changes a log's segment list. So the thread
# hands each swap to the loop (tick(), from the broker's housekeeping) and waits for it;
# meanwhile the partition's `cleaning` flag keeps retention from deleting its segments.
# Replaced segments stay open for file.delete.delay.ms (reads in flight keep working), then
# are closed and unlinked. Tests call clean_once(), which does all of it on one thread.
#
# The GIL: a cleaner thread runs Python most of the time (record framing, the dedupe map),
# and the event loop gives the GIL up at each system call it makes, then waits for it
# again: up to one switch interval each time. At Python's default (5 ms) that multiplied
# produce latency during cleaning (benchmarks/cleaner_load.py, acks=all: p50 0.25 ms idle,
# 1.1-1.2 ms cleaning; 0.8 at 0.5 ms; 0.4 at 0.1 ms, no slower cleaning); while a cleaning
# runs the process's interval is SWITCH_INTERVAL_S (SHORT_SWITCH), and the previous one
# comes back when no cleaning runs, so produce/fetch without cleaning switch as before.
#
# Internal topics are logs like the others: a topic whose cleanup.policy is `compact` is
# cleaned, wherever its records come from.
from __future__ import annotations

import asyncio
import logging
import queue
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..clock import Clock, SystemClock
from . import cleaner_core as core
from .cleaner_checkpoint import read_checkpoint, write_checkpoint
from .cleaner_map import OffsetMap, slots_for
from .cleaner_swap import discard, replace_segments
from .partition import PartitionLog
from .segment import Segment

log = logging.getLogger("kafkalite.log")

DOUBLE_MAX = 1.7976931348623157e308
SWITCH_INTERVAL_S = 0.0001


class ShortSwitchInterval:
    """The interpreter's switch interval at most SWITCH_INTERVAL_S while any cleaner
    thread is inside; the one found by the first to enter is restored by the last out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._saved = 0.0

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._saved = sys.getswitchinterval()
                if self._saved > SWITCH_INTERVAL_S:
                    sys.setswitchinterval(SWITCH_INTERVAL_S)
            self._inside += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                sys.setswitchinterval(self._saved)


SHORT_SWITCH = ShortSwitchInterval()


@dataclass
class CleanerSettings:
    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_max_bytes_per_second: float = DOUBLE_MAX


@dataclass
class Plan:
    """LogToClean: one partition's cleanable section and how dirty it is."""
    partition: PartitionLog
    segments: list[Segment]  # a snapshot of the log's, the active one last
    first_dirty: int
    uncleanable: int
    ratio: float
    forced: bool
    delay_ms: int = 0  # how far past max.compaction.lag.ms its oldest dirty record is
    truncations: int = 0  # the log's truncation count when planned (replica.py)


@dataclass
class CleanStats:
    """One thread's last cleaning, for Kafka's LogCleaner gauges."""
    bytes_read: int = 0
    bytes_written: int = 0
    elapsed_ms: int = 0
    buffer_utilization: float = 0.0


@dataclass
class _Swap:
    partition: PartitionLog
    old: list[Segment]
    new: Segment
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    truncations: int = 0  # the plan's: a log truncated since is not swapped into


class LogCleaner:
    def __init__(self, data_dir: str, logs: Callable[[], Iterable[PartitionLog]],
                 settings: CleanerSettings, clock: Clock | None = None):
        self.data_dir = data_dir
        self.logs = logs
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.checkpoints = read_checkpoint(data_dir)
        self._lock = threading.Lock()  # checkpoints, _busy, _horizons
        self._busy: set[tuple[str, int]] = set()
        self._truncations: dict[tuple[str, int], int] = {}  # the count plan() last saw
        self._failed: set[tuple[str, int]] = set()
        self._horizons: dict[tuple[str, int], int] = {}
        self._swaps: queue.SimpleQueue[_Swap] = queue.SimpleQueue()
        self._deleting: list[tuple[int, PartitionLog, list[Segment]]] = []
        self._stop = threading.Event()
        self._wake: Callable[[], object] | None = None  # runs tick() soon on the loop
        self._threads: list[threading.Thread] = []
        self.bytes_read = 0
        self.bytes_written = 0
        self.cleanings = 0
        self.last_ratio = 0.0
        # what Kafka's LogCleaner / LogCleanerManager gauges show (read by kafkalite.metrics)
        self.last_stats: dict[str, CleanStats] = {}  # by thread name
        self.max_dirty_ratio = 0.0  # the dirtiest cleanable log's, at the last choice
        self.max_compaction_delay_ms = 0
        self.last_run_ms: int | None = None  # wall clock of the last choice

    # --- choosing ---------------------------------------------------------------------------

    def plan(self, p: PartitionLog, now: int) -> Plan | None:
        cfg = p.config
        if "compact" not in cfg.cleanup_policy:
            return None
        segs = list(p.segments)
        start = p.log_start_offset
        key = (p.topic, p.partition)
        if self._truncations.get(key, 0) != p.truncations:
            # As Kafka's maybeTruncateCheckpoint: what a truncation removed was rewritten
            # by the next leader; the records from there on are dirty again.
            self._truncations[key] = p.truncations
            if key in self.checkpoints:
                self.checkpoints[key] = min(self.checkpoints[key], p.lowest_truncation)
        first_dirty = self.checkpoints.get(key, start)
        if not start <= first_dirty <= segs[-1].base_offset:
            first_dirty = start  # a truncated or re-created log: as Kafka, from the start
        uncleanable = min(segs[-1].base_offset, p.last_stable_offset)
        if cfg.min_compaction_lag_ms > 0:
            for s in segs[:-1]:
                lag = cfg.min_compaction_lag_ms
                if s.next_offset > first_dirty and s.max_timestamp > now - lag:
                    uncleanable = min(uncleanable, s.base_offset)
                    break
        closed = [s for s in segs[:-1] if s.base_offset < uncleanable]
        dirty = sum(s.size for s in closed if s.next_offset > first_dirty)
        total = sum(s.size for s in closed)
        if not closed or total == 0:
            return None
        first = next((s for s in closed if s.next_offset > first_dirty), None)
        forced = False
        delay = 0
        if first is not None and dirty:
            ts = first.first_batch_timestamp
            ts = first.max_timestamp if ts is None or ts < 0 else ts
            forced = ts >= 0 and now - ts > cfg.max_compaction_lag_ms
            delay = now - ts - cfg.max_compaction_lag_ms if forced else 0
        horizon = self._horizons.get((p.topic, p.partition))
        forced = forced or horizon is not None and horizon <= now
        ratio = dirty / total
        if not forced and not (dirty and ratio > cfg.min_cleanable_ratio):
            return None
        return Plan(p, segs, first_dirty, uncleanable, ratio, forced, delay, p.truncations)

    def grab(self, now: int) -> Plan | None:
        """The partition to clean now, marked as being cleaned; None when none needs it."""
        with self._lock:
            plans = []
            for p in self.logs():
                key = (p.topic, p.partition)
                if key in self._busy or key in self._failed:
                    continue
                plan = self.plan(p, now)
                if plan is not None:
                    plans.append(plan)
            self.last_run_ms = now
            self.max_dirty_ratio = max((pl.ratio for pl in plans), default=0.0)
            self.max_compaction_delay_ms = max((pl.delay_ms for pl in plans), default=0)
            if not plans:
                return None
            best = max(plans, key=lambda pl: (pl.forced, pl.ratio))
            self._busy.add((best.partition.topic, best.partition.partition))
            best.partition.cleaning = True
            return best

    # --- cleaning ---------------------------------------------------------------------------

    def clean_once(self, now: int | None = None) -> Plan | None:
        """Clean the dirtiest partition on this thread, swaps included (tests, tools)."""
        plan = self.grab(self.clock.wall_ms() if now is None else now)
        if plan is not None:
            self._clean(plan, self.clock.wall_ms() if now is None else now, self._apply)
        return plan

    def _clean(self, plan: Plan, now: int, apply: Callable[[_Swap], bool]) -> None:
        p = plan.partition
        key = (p.topic, p.partition)
        cfg = p.config
        started = self.clock.monotonic_ms()
        try:
            # A truncation of the log (a follower's) removes or cuts segments being read.
            throttle = core.Throttle(
                self.settings.io_max_bytes_per_second,
                lambda: self._stop.is_set() or p.truncations != plan.truncations)
            segs = plan.segments
            omap = OffsetMap(slots_for(self.settings.dedupe_buffer_size, self.settings.threads))
            end = core.build_map(segs[:-1], plan.first_dirty, plan.uncleanable, omap,
                                 core.TxnState(core.aborted_txns(segs, plan.uncleanable)),
                                 throttle)
            todo = [s for s in segs[:-1] if s.base_offset < end]
            last = core.producer_last_offsets(segs, [s.size for s in segs])
            txns = core.TxnState(core.aborted_txns(segs, end))
            gc = core.GroupCleaner(omap, end, txns, last, now,
                                   cfg.delete_retention_ms, throttle)
            groups = core.group_segments(todo, cfg.segment_bytes, cfg.index_interval_bytes)
            for group in groups:
                new = gc.clean(group, p.directory, cfg.index_interval_bytes)
                if not apply(_Swap(p, group, new, truncations=plan.truncations)):
                    raise core.CleaningAborted(f"swap of {new.path} not applied")
            with self._lock:
                self.checkpoints[key] = end
                if gc.earliest_horizon is None:
                    self._horizons.pop(key, None)
                else:
                    self._horizons[key] = gc.earliest_horizon
                snapshot = dict(self.checkpoints)
            write_checkpoint(self.data_dir, snapshot)
            self.bytes_read += gc.bytes_read
            self.bytes_written += gc.bytes_written
            self.cleanings += 1
            self.last_ratio = plan.ratio
            self.last_stats[threading.current_thread().name] = CleanStats(
                gc.bytes_read, gc.bytes_written, self.clock.monotonic_ms() - started,
                len(omap) / omap.slots)
            log.info("Cleaned %s-%d up to offset %d: %d bytes read, %d written (dirty ratio "
                     "%.2f)", p.topic, p.partition, end, gc.bytes_read, gc.bytes_written,
                     plan.ratio)
        except core.CleaningAborted as e:
            log.info("Cleaning of %s-%d stopped: %s", p.topic, p.partition, e)
        except Exception as e:
            if p.truncations != plan.truncations:  # its files changed under it: not a fault
                log.info("Cleaning of %s-%d stopped by a truncation: %s", p.topic,
                         p.partition, e)
                return

            log.exception("Cleaning of %s-%d failed; it is left alone until restart",
                          p.topic, p.partition)
            with self._lock:
                self._failed.add(key)
        finally:
            with self._lock:
                self._busy.discard(key)
                p.cleaning = False

    def _apply(self, swap: _Swap) -> bool:
        """Swap the cleaned segment in (on the thread owning the log's segment list)."""
        p = swap.partition
        try:
            if p.truncations != swap.truncations:
                # The offset map may hold keys of records the truncation removed.
                discard(swap.new)
                raise ValueError("the log was truncated during cleaning")
            old = replace_segments(p, swap.old, swap.new)
        except (ValueError, OSError) as e:
            log.warning("Cleaned segment of %s-%d not swapped in: %s", p.topic, p.partition, e)
            return False
        due = self.clock.monotonic_ms() + p.config.file_delete_delay_ms
        self._deleting.append((due, p, old))
        return True

    # --- the event loop's side --------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Apply the swaps the cleaner threads wait for; close and remove replaced segments
        whose file.delete.delay.ms has passed (`now_ms`: the clock's monotonic reading)."""
        if self._wake is None:
            try:
                loop = asyncio.get_running_loop()
                self._wake = lambda: loop.call_soon_threadsafe(self._woken)
            except RuntimeError:
                pass
        while True:
            try:
                swap = self._swaps.get_nowait()
            except queue.Empty:
                break
            try:
                swap.ok = self._apply(swap)
            finally:
                swap.done.set()
        keep = []
        for due, p, segs in self._deleting:
            if now_ms < due:
                keep.append((due, p, segs))
                continue
            names = []
            for seg in segs:
                names += [n for n in (seg.path, seg.index.path, seg.time_index.path,
                                      seg.txn_index.path)]
                seg.close()
            p.durability.unlink([n.rsplit("/", 1)[-1] for n in names])
        self._deleting = keep

    def _woken(self) -> None:
        try:
            self.tick(self.clock.monotonic_ms())
        except Exception:
            log.exception("Applying the log cleaner's swaps failed")

    def _handoff(self, swap: _Swap) -> bool:
        self._swaps.put(swap)
        wake = self._wake
        if wake is not None:
            try:
                wake()
            except RuntimeError:  # the loop is closed: the stop() below applies it
                pass
        while not swap.done.wait(0.1):
            if self._stop.is_set():
                return False  # the .swap files stay: recovery completes the swap
        return swap.ok

    # --- threads ----------------------------------------------------------------------------

    def start(self) -> None:
        if not self.settings.enable or self._threads:
            return
        for i in range(max(1, self.settings.threads)):
            t = threading.Thread(target=self._run, name=f"kafkalite-cleaner-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                plan = self.grab(self.clock.wall_ms())
            except Exception:
                log.exception("Choosing a log to clean failed")
                plan = None
            if plan is None:
                self._stop.wait(self.settings.backoff_ms / 1000)
                continue
            with SHORT_SWITCH:
                self._clean(plan, self.clock.wall_ms(), self._handoff)

    def dead_threads(self) -> int:
        return 0 if self._stop.is_set() else sum(not t.is_alive() for t in self._threads)

    def uncleanable(self) -> list[PartitionLog]:
        """The partitions a failed cleaning left alone until restart."""
        with self._lock:
            failed = set(self._failed)
        return [p for p in self.logs() if (p.topic, p.partition) in failed]

    def stop(self) -> None:
        """Stop the threads (a cleaning in progress is abandoned; its files are removed
        or, once they are `.swap`, completed by recovery), then close replaced segments."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        self._threads.clear()
        self.tick(2**63 - 1)


__all__ = ["CleanStats", "CleanerSettings", "LogCleaner", "Plan", "discard"]
