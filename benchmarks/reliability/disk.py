# Full disk: the broker's data directory on a small tmpfs (mounted here; needs root and a
# kernel that allows it, otherwise the run reports why it was skipped).
#
#   python -m benchmarks.reliability.disk
#
# Produce 20 KiB batches until Produce answers KAFKA_STORAGE_ERROR (56); every batch
# acknowledged before that must read back intact while the disk is still full, and the
# broker must keep answering. Then the tmpfs is grown ("space returns"): producing must
# work again, and after a SIGKILL and restart every acknowledged batch is still there, once,
# at its offset, byte-identical.
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from .common import (Broker, Conn, build_batch, create_topic, emit, fetch_range,
                     list_offsets, produce_batch)

STORAGE_ERROR = 56


def mount_tmpfs(path: str, size: str) -> str | None:
    """Mount a tmpfs at `path`; None on success, else the reason it could not be done."""
    if os.geteuid() != 0:
        return "not root: cannot mount a tmpfs"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"mount failed: {r.stderr.strip()}"


def _produce_until_full(c: Conn, rnd: random.Random, acked: list, limit: int) -> dict:
    codes: dict[int, int] = {}
    for i in range(limit):
        recs = [(b"r%d-%d" % (len(acked), j), rnd.randbytes(5000)) for j in range(4)]
        code, off = produce_batch(c, "full", 0, build_batch(recs))
        codes[code] = codes.get(code, 0) + 1
        if code == 0:
            acked.append((off, recs))
        elif code == STORAGE_ERROR:
            return codes
    return codes


def _check_acked(c: Conn, acked: list) -> list[str]:
    end = list_offsets(c, "full", [0])[0]
    recs = {r.offset: (r.key, r.value) for r in fetch_range(c, "full", 0, 0, end)}
    problems = []
    for off, batch in acked:
        for j, kv in enumerate(batch):
            if recs.get(off + j) != kv:
                problems.append(f"acknowledged record at {off + j} missing or changed")
    want = sum(len(b) for _o, b in acked)
    if len(recs) != want:
        problems.append(f"log holds {len(recs)} records, {want} were acknowledged")
    return problems[:10]


def run(size_kb: int = 1024, seed: int = 1) -> dict:
    root = tempfile.mkdtemp(prefix="kafkalite-disk-")
    reason = mount_tmpfs(root, f"{size_kb}k")
    if reason:
        shutil.rmtree(root, ignore_errors=True)
        return {"skipped": reason}
    rnd = random.Random(seed)
    logs = tempfile.mkdtemp(prefix="kafkalite-disk-log-")
    b = Broker(data_dir=os.path.join(root, "data"), log_path=os.path.join(logs, "broker.log"),
               settings={"log.segment.bytes": "262144"})
    out: dict = {"tmpfs_kb": size_kb}
    acked: list = []
    try:
        b.start_measured()
        with Conn(b.bootstrap, timeout=30) as c:
            create_topic(c, "full", 1)
            out["codes_until_full"] = _produce_until_full(c, rnd, acked, 10_000)
            out["acked_before_full"] = sum(len(x) for _o, x in acked)
            out["storage_error_seen"] = STORAGE_ERROR in out["codes_until_full"]
            # the disk is still full: more produces fail cleanly, reads still work
            out["codes_while_full"] = _produce_until_full(c, rnd, acked, 5)
            out["problems_while_full"] = _check_acked(c, acked)
            out["answers_while_full"] = c.call(18, 0).error_code == 0
        subprocess.run(["mount", "-o", f"remount,size={size_kb * 8}k", root], check=True)
        time.sleep(0.2)
        with Conn(b.bootstrap, timeout=30) as c:
            before = len(acked)
            codes = _produce_until_full(c, rnd, acked, 20)
            out["codes_after_space_returns"] = codes
            out["acked_after_space_returns"] = len(acked) - before
            out["problems_after_space_returns"] = _check_acked(c, acked)
        b.kill()
        b.start_measured()
        with Conn(b.bootstrap, timeout=30) as c:
            out["problems_after_restart"] = _check_acked(c, acked)
        out["broker_log_storage_lines"] = sum(
            1 for ln in b.read_log().splitlines() if "No space" in ln or "Errno 28" in ln)
        out["unexpected_errors_logged"] = b.read_log().count("Unexpected error")
        return out
    finally:
        b.kill()
        subprocess.run(["umount", root], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fill the data disk; check errors and recovery.")
    ap.add_argument("--size-kb", type=int, default=1024)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    r = run(args.size_kb)
    emit(r, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
