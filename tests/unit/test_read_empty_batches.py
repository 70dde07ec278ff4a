# A segment the cleaner emptied holds record-less batches only; a read that reaches the end
# of such a segment goes on into the next segments (Kafka's read skips its empty segments),
# so that a fetch answer is never empty batches alone, which librdkafka takes for a fetch
# size too small (MSG_SIZE_TOO_LARGE after a few doublings). The read across segments runs
# end to end in tests/integration/test_compaction_concurrent.py.
from __future__ import annotations

import time

from kafkalite.log.cleaner_records import empty_batch
from kafkalite.log.partition import only_empty_batches
from kafkalite.wire.records import parse_header
from tests.helpers.kbatch import build_batch


def _records(n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(b"k%d" % i, b"v%d" % i, [], now) for i in range(n)])


def test_only_empty_batches_walks_headers():
    full = _records(3)
    empty = empty_batch(parse_header(full))
    assert only_empty_batches(empty) and only_empty_batches(empty * 3)
    assert not only_empty_batches(b"")
    assert not only_empty_batches(full) and not only_empty_batches(empty + full)
    assert not only_empty_batches(empty + empty[:30])  # a cut batch: not known to be empty
    control = bytearray(empty)
    control[22] |= 0x20  # a control batch is something a client counts
    assert not only_empty_batches(bytes(control))
