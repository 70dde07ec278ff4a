# Reads that never wait for the disk on the event loop.
#
# A fetch of data still in the page cache (the usual case: consumers read what was just
# written) is served at once with preadv(RWF_NOWAIT), as cheap as pread. A range that is
# not all cached raises WouldBlock instead of stalling every connection on a disk read;
# the caller reads the range in a worker thread (WouldBlock.warm), which brings it into the
# page cache, and tries again. Where the file system does not support RWF_NOWAIT
# (EOPNOTSUPP), every non-blocking read takes the worker-thread path.
from __future__ import annotations

import asyncio
import errno
import os
from typing import Any, Callable, TypeVar

from .errors import StorageError

T = TypeVar("T")
_TRIES = 3
_NOWAIT = getattr(os, "RWF_NOWAIT", 0)
_supported = bool(_NOWAIT) and hasattr(os, "preadv")

try:
    # bytearray(n) zero-fills: 15 us per MiB, 10-15% of the CPU of a cached 1 MiB read,
    # for bytes that preadv overwrites at once. A buffer preadv did not fill is never
    # returned.
    import ctypes
    _uninitialized = ctypes.pythonapi.PyByteArray_FromStringAndSize
    _uninitialized.restype = ctypes.py_object
    _uninitialized.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)

    def _buffer(n: int) -> bytearray:
        return _uninitialized(None, n)
except (ImportError, AttributeError):  # not CPython
    _buffer = bytearray

# Fetches allocate and free a few 1 MiB read buffers each. glibc returns freed memory at
# the top of the heap to the kernel once it passes M_TRIM_THRESHOLD (2x the largest block
# freed so far, by default): the next fetch then faults its buffers back in page by page,
# each page zeroed by the kernel. Profiled under the 1 KiB consume benchmark that was one
# page fault per 12 KiB sent and a fifth of the broker's CPU. Fixed thresholds keep up to
# _TRIM bytes of freed heap for reuse (blocks above _MMAP still get their own mapping).
_MMAP = 16 * 1024 * 1024
_TRIM = 32 * 1024 * 1024


def _keep_freed_buffers() -> bool:
    """Raise glibc's trim and mmap thresholds; False where malloc is not glibc's."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (only glibc has these thresholds)
        mallopt = libc.mallopt
    except (ImportError, OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(mallopt(m_mmap_threshold, _MMAP)) and bool(mallopt(m_trim_threshold, _TRIM))


ALLOCATOR_TUNED = _keep_freed_buffers()


class WouldBlock(Exception):
    """The range is not all in the page cache. Holds a duplicate of the descriptor, so that
    warm() stays valid if the loop closes or deletes the file meanwhile."""

    def __init__(self, fd: int, position: int, length: int):
        super().__init__(f"{length} bytes at {position} not cached")
        self.fd = os.dup(fd)
        self.position = position
        self.length = length

    def warm(self) -> None:
        """Read the range (in a worker thread), then release the descriptor."""
        try:
            os.pread(self.fd, self.length, self.position)
        finally:
            os.close(self.fd)

    def release(self) -> None:
        os.close(self.fd)


def pread(fd: int, length: int, position: int, nowait: bool = False) -> bytes | bytearray:
    """`length` bytes at `position` (the caller never asks past the end of the file). With
    `nowait`, raises WouldBlock rather than wait for the disk. Raises StorageError."""
    try:
        if not nowait:
            return os.pread(fd, length, position)
        if not _supported:
            raise WouldBlock(fd, position, length)
        buf = _buffer(length)
        # A short count means the rest of the range is not cached (never end of file here).
        if os.preadv(fd, [buf], position, _NOWAIT) == length:
            return buf
        raise WouldBlock(fd, position, length)
    except BlockingIOError:
        raise WouldBlock(fd, position, length) from None
    except OSError as e:
        if nowait and e.errno == errno.EOPNOTSUPP:
            _unsupported()
            raise WouldBlock(fd, position, length) from None
        raise StorageError(e.errno, f"read of {length} bytes at {position} failed: "
                                    f"{e.strerror}") from e


def _unsupported() -> None:
    global _supported
    _supported = False


async def without_blocking(read: Callable[..., T], *args: Any) -> T:
    """`read(*args, nowait=True)`, warming what it would block on in a worker thread and
    trying again."""
    for _ in range(_TRIES):
        try:
            return read(*args, nowait=True)
        except WouldBlock as wb:
            await asyncio.get_running_loop().run_in_executor(None, wb.warm)
    # Evicted again each time before it could be used (memory pressure): read it here.
    return read(*args)
