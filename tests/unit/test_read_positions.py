"""The one batch-prefix walk shared by read positions and read_committed's upper bound."""
import os
import subprocess
import sys

import kafkalite
from kafkalite.broker.handlers.fetch import upper_bound
from kafkalite.log.read_positions import after_last_whole_batch, walk_batches
from tests.helpers.kbatch import simple_batch, stored_form


def _log() -> tuple[bytes, list[tuple[int, int]]]:
    """Three stored batches of 3, 1 and 5 records; (start byte, next offset) of each."""
    data, bounds, offset = b"", [], 100
    for n in (3, 1, 5):
        bounds.append((len(data), offset + n))
        data += stored_form(simple_batch(n), offset)
        offset += n
    return data, bounds


def test_every_cut_of_a_read_gives_both_answers():
    data, bounds = _log()
    ends = [start for start, _ in bounds[1:]] + [len(data)]
    for cut in range(len(data) + 1):
        part = data[:cut]
        whole = [(end, nxt) for (_s, nxt), end in zip(bounds, ends) if end <= cut]
        expect_whole = (whole[-1][1], whole[-1][0]) if whole else (-1, 0)
        assert after_last_whole_batch(part) == expect_whole, cut
        started = [(s, nxt) for s, nxt in bounds if s + 12 <= cut]
        if not started:
            expect_upper = 7  # the fetch offset: no batch at all
        elif started[-1][0] + 27 <= cut:
            expect_upper = started[-1][1]  # lastOffsetDelta is there
        else:
            expect_upper = started[-1][1] - {0: 3, 1: 1, 2: 5}[len(started) - 1] + 1
        assert upper_bound(part, 7) == expect_upper, cut
        assert walk_batches(memoryview(part))[:2] == expect_whole


def test_a_damaged_length_ends_the_walk():
    data, bounds = _log()
    damaged = bytearray(data)
    damaged[bounds[1][0] + 8:bounds[1][0] + 12] = (3).to_bytes(4, "big")  # < a batch header
    assert walk_batches(damaged) == (bounds[0][1], bounds[1][0], bounds[0][1])



_FETCHES = """
import os, resource, sys
from kafkalite.log import reads
fd = os.open(sys.argv[1], os.O_RDONLY)
def fetch():
    bufs = [reads.pread(fd, 1 << 20, i << 20, nowait=True) for i in range(4)]
    assert sum(map(len, bufs)) == 4 << 20
fetch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    fetch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_fetch_sized_read_buffers_are_reused_not_faulted_in_again(tmp_path):
    """A fetch reads a few 1 MiB buffers and frees them once sent; the next fetch must get
    that memory back from the heap, not fault fresh zeroed pages in from the kernel. A
    process of its own: a test runner's long-used heap hides what a broker's heap does."""
    seg = tmp_path / "seg"
    seg.write_bytes(os.urandom(4 << 20))
    root = os.path.dirname(os.path.dirname(kafkalite.__file__))
    out = subprocess.run([sys.executable, "-c", _FETCHES, str(seg)], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0, out.stderr
    # 20 fetches of 4 MiB faulted in anew are 20,480 pages.
    assert int(out.stdout) < 1000, out.stdout
