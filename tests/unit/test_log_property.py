# Property: whatever sequence of appends, rolls, clean restarts and crashes (close without
# the clean-shutdown marker, optionally with the last batch torn at a random byte) happens,
# the log reads back exactly the acknowledged batches (appended and not torn), in order,
# byte-identical, and timestamp lookups agree with a model of the records.
from __future__ import annotations

import os
import struct
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.log.partition import LogConfig, PartitionLog
from kafkalite.wire.records import validate_produce_batch

from tests.helpers.kbatch import build_batch, stored_form
from .test_log import read_all

T0 = 1_700_000_000_000

append_op = st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 300),
                      st.lists(st.integers(0, 50), min_size=4, max_size=4), st.integers(0, 4))
roll_op = st.just(("roll",))
restart_op = st.just(("restart",))
crash_op = st.tuples(st.just("crash"), st.booleans(), st.floats(0, 1, exclude_max=True))
ops = st.lists(st.one_of(append_op, append_op, append_op, roll_op, restart_op, crash_op),
               max_size=30)


def _config(segment_bytes: int, interval: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                     segment_ms=2**62)


@settings(max_examples=int(os.environ.get("KL_PROP_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, segment_bytes=st.integers(200, 1500), interval=st.integers(0, 400),
       queries=st.lists(st.integers(-1, 52), min_size=3, max_size=3))
def test_acknowledged_batches_survive_any_crash(ops, segment_bytes, interval, queries):
    with tempfile.TemporaryDirectory(prefix="kl-prop-") as d:
        cfg = _config(segment_bytes, interval)
        p = PartitionLog(d, "t", 0, cfg)
        acked: list[bytes] = []           # stored form of every acknowledged batch
        records: list[tuple[int, int]] = []  # (offset, timestamp) of every acked record
        try:
            for op in ops:
                if op[0] == "append":
                    _, n, size, tss, codec = op
                    recs = [(b"k%d" % i, bytes([97 + i]) * size, [("h", b"%d" % i)],
                             T0 + tss[i]) for i in range(n)]
                    batch = build_batch(recs, codec)
                    base = p.append(batch, validate_produce_batch(batch, 1 << 30), T0)
                    assert base == p.log_end_offset - n
                    acked.append(stored_form(batch, base))
                    records += [(base + i, T0 + tss[i]) for i in range(n)]
                elif op[0] == "roll":
                    p.roll()
                elif op[0] == "restart":
                    p.close()
                    p = PartitionLog(d, "t", 0, cfg)
                else:
                    _, tear, where = op
                    active = p.active
                    path, size = active.path, active.size
                    p.close()
                    if tear and size:
                        last = acked.pop()
                        (count,) = struct.unpack_from(">i", last, 57)
                        del records[-count:]
                        os.truncate(path, size - len(last) + int(where * len(last)))
                    p = PartitionLog(d, "t", 0, cfg, recover=True)
                expected_end = records[-1][0] + 1 if records else 0
                assert p.log_end_offset == expected_end
            assert read_all(p) == b"".join(acked)
            assert read_all(p, max_bytes=1) == b"".join(acked)
            for q in queries:
                want = next(((o, t) for o, t in records if t >= T0 + q), None)
                assert p.offset_for_timestamp(T0 + q) == want
            if records:
                top = max(t for _, t in records)
                assert p.max_timestamp_offset() == next((o, t) for o, t in records if t == top)
        finally:
            p.close()
