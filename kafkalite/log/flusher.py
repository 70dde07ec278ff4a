# Durability work off the event loop: fsyncs, small checkpoint files and unlinks of deleted
# segments run on one worker thread, in the order they were submitted.
#
# A roll used to fsync the old segment and the directory on the loop thread, stalling every
# connection for as long as the disk took (90 ms in the issue; up to 160 ms measured with
# 64 MiB segments by benchmarks/loop_stall.py). Kafka flushes rolled segments asynchronously too. Each job works on descriptors
# duplicated when it was submitted (a segment fd, or the partition directory's fd), so the
# loop may close, delete or rename the originals meanwhile, and a topic re-created under the
# same name never receives a write or an unlink meant for its predecessor. One thread keeps
# the jobs of a partition in order: its recovery point is written only after the segments
# below it are on disk.
from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from .errors import storage_error

log = logging.getLogger("kafkalite.log")

RECOVERY_POINT = "recovery-point"  # in each partition directory (recovery.py reads it)

_lock = threading.Lock()
_workers: dict[str, ThreadPoolExecutor] = {}


def _single_thread(name: str) -> ThreadPoolExecutor:
    with _lock:
        worker = _workers.get(name)
        if worker is None:
            worker = _workers[name] = ThreadPoolExecutor(max_workers=1,
                                                         thread_name_prefix=name)
        return worker


def shared_flusher() -> ThreadPoolExecutor:
    """The process's flusher: one worker thread, started on the first job."""
    return _single_thread("kafkalite-flush")


def metadata_worker() -> ThreadPoolExecutor:
    """The thread for the file work of topics' lives (log/manager.py): one, so that it runs
    in the order it was queued, and not the flusher's, so that creating a topic of many
    partitions does not delay the fsyncs that acks=all answers wait for."""
    return _single_thread("kafkalite-meta")


def open_dir(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_all(fds: list[int]) -> None:
    """fsync every descriptor, then close them all (even after a failure)."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


def write_at(dir_fd: int, name: str, data: bytes) -> None:
    """Replace `name` in the directory `dir_fd` atomically and durably (the file and the
    directory entry are fsynced); a crash leaves the old or the new content."""
    tmp = f".tmp-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def unlink_at(dir_fd: int, names: list[str]) -> None:
    for name in names:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass


class _Job:
    __slots__ = ("fn", "args", "started", "segment", "future")

    def __init__(self, fn: Callable[..., Any], args: tuple, segment: object):
        self.fn = fn
        self.args = args
        self.started = False
        self.segment = segment
        self.future: Future | None = None

    def __call__(self) -> Any:
        self.started = True
        return self.fn(*self.args)


class PartitionFlusher:
    """The durability work of one partition, queued on the shared flusher.

    A failed fsync of segment data is remembered (`failed`): from then on the recovery
    point no longer moves, and flush() at shutdown reports it, so that the broker does not
    write its clean-shutdown marker over data that may not be on disk."""

    def __init__(self, directory: str, label: str,
                 executor: ThreadPoolExecutor | None = None):
        self.directory = directory
        self.label = label
        self._executor = executor or shared_flusher()
        self._pending: list[Future] = []
        self._last_fsync: _Job | None = None
        self._rolls = 0
        self.failed: BaseException | None = None

    def _submit(self, fn: Callable[..., Any], args: tuple, what: str,
                segment: object = None) -> _Job:
        self._pending = [f for f in self._pending if not f.done()]
        job = _Job(fn, args, segment)
        fut = job.future = self._executor.submit(job)
        label = self.label

        def done(f: Future) -> None:
            e = f.exception()
            if e is not None:
                log.error("%s of %s failed: %s", what, label, e)
        fut.add_done_callback(done)
        self._pending.append(fut)
        return job

    def _data_fsync(self, fds: list[int], dir_fd: int | None = None) -> None:
        try:
            fsync_all(fds)
            if dir_fd is not None:
                os.fsync(dir_fd)
        except BaseException as e:
            self.failed = self.failed or e
            raise

    def fsync(self, segment: object, handles: Callable[[], list[int]]) -> Future:
        """Queue an fsync of `segment` (the active one). One that is queued for the same
        segment and not yet started covers every append made until it starts."""
        job = self._last_fsync
        if job is not None and not job.started and job.segment is segment:
            assert job.future is not None
            return job.future
        job = self._last_fsync = self._submit(self._data_fsync, (handles(),), "flush",
                                              segment)
        assert job.future is not None
        return job.future

    def rolled(self, fds: list[int], dir_fd: int, recovery_point: int) -> None:
        """Queue the fsync of a rolled segment (`fds`) and of the directory (`dir_fd`,
        which names the new segment; closed by the job), then the new recovery point."""
        self._rolls += 1
        self._submit(self._flush_rolled, (fds, dir_fd, recovery_point, self._rolls),
                     "flush of a rolled segment")

    def _flush_rolled(self, fds: list[int], dir_fd: int, recovery_point: int,
                      roll: int) -> None:
        try:
            self._data_fsync(fds, dir_fd)
            # Only the latest roll writes the checkpoint; none after a failed fsync.
            if roll == self._rolls and self.failed is None:
                write_at(dir_fd, RECOVERY_POINT, str(recovery_point).encode())
        finally:
            os.close(dir_fd)

    def checkpoint(self, name: str, data: bytes) -> Future:
        """Queue a durable replacement of the small file `name`. Raises OSError when the
        directory cannot be opened."""
        dir_fd = open_dir(self.directory)
        job = self._submit(write_and_close, (dir_fd, name, data), f"checkpoint {name}")
        assert job.future is not None
        return job.future

    def truncated(self, end_offset: int) -> Future:
        """After the log was cut back to `end_offset`: the recovery point drops to it unless
        it is lower, and the directory (which lost the removed segments' names) is fsynced,
        so a crash cannot skip the check of what is appended next, nor bring removed
        segments back. Raises OSError when the directory cannot be opened."""
        dir_fd = open_dir(self.directory)
        job = self._submit(_lower_recovery_point, (dir_fd, end_offset), "truncation")
        assert job.future is not None
        return job.future

    def unlink(self, names: list[str]) -> None:
        """Queue the removal of files already renamed out of the log (freeing a large
        file's blocks can take a while)."""
        if not names:
            return
        try:
            dir_fd = open_dir(self.directory)
        except OSError as e:
            log.error("Deleted segments of %s stay on disk: %s", self.label, e)
            return
        self._submit(_unlink_and_close, (dir_fd, names), "removal of deleted segments")

    def drain(self) -> BaseException | None:
        """Wait, blocking, for the queued work; returns the first failure, if any."""
        pending, self._pending = self._pending, []
        error = None
        for fut in pending:
            error = error or fut.exception()
        return error


async def wait_durable(fut: Future | None, label: str) -> None:
    """Wait for a queued job from the event loop. Raises StorageError."""
    if fut is None:
        return
    try:
        await asyncio.wrap_future(fut)
    except OSError as e:
        raise storage_error(e, label) from e


def write_and_close(dir_fd: int, name: str, data: bytes) -> None:
    """write_at, then close `dir_fd` (a job's own descriptor)."""
    try:
        write_at(dir_fd, name, data)
    finally:
        os.close(dir_fd)


def _unlink_and_close(dir_fd: int, names: list[str]) -> None:
    try:
        unlink_at(dir_fd, names)
    finally:
        os.close(dir_fd)


def _lower_recovery_point(dir_fd: int, end_offset: int) -> None:
    try:
        try:
            with open(os.open(RECOVERY_POINT, os.O_RDONLY, dir_fd=dir_fd)) as f:
                current = int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            current = 0
        write_at(dir_fd, RECOVERY_POINT, str(min(current, end_offset)).encode())
    finally:
        os.close(dir_fd)
