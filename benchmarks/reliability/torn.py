# Torn and corrupt files: damage a stopped broker's data directory, restart it, and check
# that it recovers to the last valid batch, rebuilds its indexes, never serves a corrupt
# batch, keeps its producer state, and logs what it dropped.
#
#   python -m benchmarks.reliability.torn --cases 400
#
# A baseline is produced once per shutdown kind (SIGKILL: "unclean", SIGTERM: "clean", which
# leaves the clean-shutdown marker and producer snapshots): 2 partitions, 24 KiB segments,
# a 512-byte index interval, idempotent batches of 1-6 records with increasing timestamps.
# Each case copies a baseline, applies one damage (KINDS), starts the broker and checks
# (check_case): it answers; every served batch passes CRC32C; the records served are exactly
# the expected prefix of what was acknowledged, at the same offsets, byte-identical; Fetch at
# random offsets and ListOffsets at random timestamps give the right answers (index
# correctness); the broker's log names the bytes it truncated; a retry of the producer's last
# batch is deduplicated (or appended if recovery legitimately dropped it); a new produce
# lands at the log end and reads back.
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

from .common import (Broker, Conn, build_batch, create_topic, emit, fetch_range, list_offsets,
                     produce_batch)
from .torn_damage import PARTS, TOPIC, Baseline, Expect, PBatch, damage

SETTINGS = {"log.segment.bytes": "24576", "log.index.interval.bytes": "512",
            "log.retention.check.interval.ms": "3600000", "log.retention.ms": "-1"}
# Recent timestamps: a producer whose last batch is older than producer.id.expiration.ms
# (a day) is forgotten at start, as by Kafka, and its retries would no longer be duplicates.
T0 = int(time.time() * 1000) - 3_600_000

# Damage applied to a stopped broker's files (torn_damage.damage).
KINDS_UNCLEAN = ("truncate_log", "flip_log_tail", "zero_tail", "truncate_index",
                 "truncate_timeindex", "delete_index", "tmp_state")
KINDS_CLEAN = ("truncate_log", "truncate_index", "truncate_timeindex", "delete_index",
               "tmp_state", "torn_snapshot")
# Bit rot inside an index is not damage a crash leaves (appends only tear the tail); it is
# run only with --bit-rot, and RELIABILITY.md reports it separately.
BIT_ROT_KINDS = ("flip_index",)


def make_baseline(root: str, clean: bool, seed: int, batches_per_partition: int = 180) -> Baseline:
    rnd = random.Random(seed)
    d = os.path.join(root, "clean" if clean else "unclean")
    broker = Broker(data_dir=d, settings=SETTINGS)
    broker.start_measured()
    try:
        with Conn(broker.bootstrap) as c:
            create_topic(c, TOPIC, len(PARTS))
            r = c.call(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
            assert r.error_code == 0, r
            base = Baseline(d, clean, r.producer_id, r.producer_epoch)
            ts = T0
            for p in PARTS:
                seq = 0
                base.batches[p] = []
                for i in range(batches_per_partition):
                    recs = []
                    for j in range(rnd.randint(1, 6)):
                        key = b"%d-%d-%d" % (p, i, j)
                        recs.append((key, rnd.randbytes(rnd.randint(20, 300)), ts))
                        ts += rnd.randint(0, 20)
                    raw = build_batch([(k, v) for k, v, _ in recs], producer=(
                        base.pid, base.epoch, seq))
                    raw = _with_timestamps(raw, [t for _, _, t in recs])
                    code, off = produce_batch(c, TOPIC, p, raw)
                    assert code == 0, code
                    base.batches[p].append(PBatch(off, recs, seq, raw))
                    seq += len(recs)
    finally:
        if clean:
            broker.stop()
        else:
            broker.kill()
    return base


def _with_timestamps(raw: bytes, stamps: list[int]) -> bytes:
    """Rebuild a batch so its records carry exactly `stamps` (builder uses now + i)."""
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    b = DefaultRecordBatch(raw)
    out = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                    producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                                    base_sequence=b.base_sequence, batch_size=1 << 30)
    for i, (r, ts) in enumerate(zip(list(b), stamps)):
        out.append(i, timestamp=ts, key=r.key, value=r.value, headers=[])
    return bytes(out.build())


# --- checks -----------------------------------------------------------------------------------

def check_case(broker: Broker, base: Baseline, exp: Expect, rnd: random.Random) -> list[str]:
    problems: list[str] = []
    log = broker.read_log()
    for p, n in exp.dropped.items():
        if n and f"truncated {n} bytes" not in log:
            problems.append(f"broker log does not say it truncated {n} bytes of {TOPIC}-{p}")
    with Conn(broker.bootstrap, timeout=30.0) as c:
        ends = list_offsets(c, TOPIC, PARTS, -1)
        for p in PARTS:
            expected = {}
            for b in base.batches[p]:
                for i, rec in enumerate(b.records):
                    expected[b.base + i] = rec
            if ends[p] != exp.leo[p]:
                problems.append(f"{TOPIC}-{p}: log end {ends[p]}, expected {exp.leo[p]}")
            served = fetch_range(c, TOPIC, p, 0, ends[p], max_bytes=8192)  # CRC-checked
            if [r.offset for r in served] != list(range(ends[p])):
                problems.append(f"{TOPIC}-{p}: served offsets are not 0..{ends[p] - 1}")
            for r in served:
                want = expected.get(r.offset)
                if want is None or (r.key, r.value, r.timestamp) != want:
                    problems.append(f"{TOPIC}-{p}@{r.offset}: served a record that was not "
                                    "acknowledged there")
                    break
            problems += _probe_index(c, p, ends[p], expected, rnd)
            if exp.probe is not None and exp.probe[0] == p:
                problems += _probe_offsets(c, p, range(exp.probe[1], exp.probe[2]), expected)
            problems += _probe_idempotence(c, base, p, ends[p])
        if not problems:
            p = rnd.choice(PARTS)
            end = list_offsets(c, TOPIC, [p], -1)[p]
            code, off = produce_batch(c, TOPIC, p, build_batch([(b"after", b"recovery")]))
            got = fetch_range(c, TOPIC, p, off, off + 1) if code == 0 else []
            if code or off != end or [(r.key, r.value) for r in got] != [(b"after", b"recovery")]:
                problems.append(f"{TOPIC}-{p}: produce after recovery gave {code}@{off} "
                                f"(log end {end})")
    return problems


def _probe_offsets(c: Conn, p: int, offsets, expected: dict) -> list[str]:
    """Fetch at each offset on its own: the index must lead to the right batch."""
    for off in offsets:
        try:
            recs = fetch_range(c, TOPIC, p, off, off + 1, max_bytes=64)
        except AssertionError as e:  # CorruptBatchServed included
            return [f"{TOPIC}-{p}: Fetch at {off}: {e}"]
        if [r.offset for r in recs] != [off] or (recs[0].key, recs[0].value) != \
                expected[off][:2]:
            return [f"{TOPIC}-{p}: Fetch at {off} served {[r.offset for r in recs]}"]
    return []


def _probe_index(c: Conn, p: int, end: int, expected: dict, rnd: random.Random) -> list[str]:
    out = _probe_offsets(c, p, rnd.sample(range(end), min(end, 12)), expected)
    stamps = sorted((rec[2], o) for o, rec in expected.items() if o < end)
    for _ in range(8):
        if not stamps:
            break
        ts = rnd.randint(stamps[0][0] - 5, stamps[-1][0] + 5)
        want = min((o for t, o in stamps if t >= ts), default=-1)
        got = list_offsets(c, TOPIC, [p], ts)[p]
        if got != want:
            out.append(f"{TOPIC}-{p}: ListOffsets({ts}) = {got}, expected {want}")
    return out


def _probe_idempotence(c: Conn, base: Baseline, p: int, end: int) -> list[str]:
    """Resend the last batch the log still holds: a duplicate, answered with its offset."""
    kept = [b for b in base.batches[p] if b.last < end]
    if not kept:
        return []
    b = kept[-1]
    code, off = produce_batch(c, TOPIC, p, b.raw)
    new_end = list_offsets(c, TOPIC, [p], -1)[p]
    if code != 0 or off != b.base or new_end != end:
        return [f"{TOPIC}-{p}: retry of batch seq {b.seq} (offset {b.base}) answered "
                f"{code}@{off}, log end {end} -> {new_end}"]
    return []


def run(cases: int, seed: int = 1, progress: bool = False, bit_rot: bool = False) -> dict:
    rnd = random.Random(seed)
    root = tempfile.mkdtemp(prefix="kafkalite-torn-")
    result: dict = {"cases": 0, "by_kind": {}, "failures": [], "start_s_max": 0.0}
    t0 = time.monotonic()
    try:
        bases = [make_baseline(root, False, seed), make_baseline(root, True, seed + 1)]
        for i in range(cases):
            base = bases[i % 2]
            kinds = (KINDS_CLEAN if base.clean else KINDS_UNCLEAN) + \
                (BIT_ROT_KINDS if bit_rot else ())
            kind = kinds[(i // 2) % len(kinds)]
            case_dir = os.path.join(root, f"case-{i}")
            shutil.copytree(base.dir, case_dir, ignore=shutil.ignore_patterns("broker.log"))
            exp = damage(kind, case_dir, base, rnd)
            label = f"{'clean' if base.clean else 'unclean'}/{kind}"
            broker = Broker(data_dir=case_dir, settings=SETTINGS)
            try:
                took = broker.start_measured(30.0)
                result["start_s_max"] = round(max(result["start_s_max"], took), 3)
                problems = check_case(broker, base, exp, rnd)
            except Exception as e:  # a broker that does not start or answer is a failure
                problems = [f"{type(e).__name__}: {e}"[:500]]
            finally:
                broker.kill()
            stats = result["by_kind"].setdefault(label, {"cases": 0, "failed": 0})
            stats["cases"] += 1
            if problems:
                stats["failed"] += 1
                result["failures"].append({"case": i, "kind": label, "damage": exp.detail,
                                           "problems": problems[:5]})
            else:
                shutil.rmtree(case_dir, ignore_errors=True)
            result["cases"] = i + 1
            if progress:
                print(f"case {i + 1}/{cases} {label}: {exp.detail}: "
                      f"{'FAIL ' + str(problems[:2]) if problems else 'ok'}",
                      file=sys.stderr, flush=True)
        result["wall_s"] = round(time.monotonic() - t0, 1)
        return result
    finally:
        if not result["failures"]:
            shutil.rmtree(root, ignore_errors=True)
        else:
            result["kept_dir"] = root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Damage a stopped broker's files; check recovery.")
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bit-rot", action="store_true",
                    help="also flip bits inside index files (not crash damage)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    r = run(args.cases, args.seed, progress=True, bit_rot=args.bit_rot)
    emit(r, args.json)
    return 0 if not r["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
