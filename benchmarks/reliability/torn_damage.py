# Damage for the torn-files harness (torn.py): what each kind does to a stopped broker's
# files, and exactly what a correct recovery must then serve (Expect): the log end offset per
# partition and the bytes the broker must say it truncated.
from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass, field

TOPIC = "t"
PARTS = [0, 1]


@dataclass
class PBatch:
    base: int
    records: list[tuple[bytes, bytes, int]]  # key, value, timestamp
    seq: int
    raw: bytes

    @property
    def last(self) -> int:
        return self.base + len(self.records) - 1


@dataclass
class Baseline:
    dir: str
    clean: bool
    pid: int
    epoch: int
    batches: dict[int, list[PBatch]] = field(default_factory=dict)


@dataclass
class Expect:
    kind: str
    detail: str
    leo: dict[int, int]                 # expected log end offset per partition
    dropped: dict[int, int] = field(default_factory=dict)  # bytes the log must say it cut
    probe: tuple[int, int, int] | None = None  # (partition, from, to): Fetch every offset


def _segments(pdir: str) -> list[str]:
    return sorted(os.path.join(pdir, f) for f in os.listdir(pdir) if f.endswith(".log"))


def batch_layout(path: str) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of every batch in a segment file."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = 12 + length
        if length < 49 or pos + size > len(data):
            break
        last = base + struct.unpack_from(">i", data, pos + 23)[0]
        out.append((pos, size, base, last))
        pos += size
    return out



# --- damage ---------------------------------------------------------------------------------

def _full_leo(base: Baseline) -> dict[int, int]:
    return {p: bs[-1].last + 1 for p, bs in base.batches.items()}


def damage(kind: str, case_dir: str, base: Baseline, rnd: random.Random) -> Expect:
    p = rnd.choice(PARTS)
    pdir = os.path.join(case_dir, f"{TOPIC}-{p}")
    segs = _segments(pdir)
    active = segs[-1]
    leo = _full_leo(base)
    exp = Expect(kind, "", dict(leo))
    size = os.path.getsize(active)
    if kind == "truncate_log":
        cut = rnd.randrange(0, size)
        os.truncate(active, cut)
        layout = batch_layout(active)
        exp.leo[p] = _survivors_leo_before(layout, cut, active)
        exp.dropped[p] = cut - _boundary_before(layout, cut)
        exp.detail = f"{os.path.basename(active)} of {TOPIC}-{p} cut at {cut}/{size}"
    elif kind in ("flip_log_tail", "zero_tail"):
        layout = batch_layout(active)
        with open(active, "r+b") as f:
            data = bytearray(f.read())
            if kind == "zero_tail":  # a crash after the size grew but before data landed
                n = rnd.randint(1, min(4096, size))
                data[size - n:] = bytes(n)
                first = size - n
            else:
                lo = max(0, size - 4096)
                # Only bytes the CRC covers (and magic/CRC themselves): the 16-byte offset
                # prefix is outside the CRC by design (see DESIGN.md).
                covered = [i for pos, sz, _b, _l in layout if pos + sz > lo
                           for i in range(max(pos + 16, lo), pos + sz)]
                hits = sorted(rnd.sample(covered, rnd.randint(1, 3)))
                for i in hits:
                    data[i] ^= 1 << rnd.randrange(8)
                first = hits[0]
            f.seek(0)
            f.write(data)
        exp.leo[p] = _survivors_leo_before(layout, first, active)
        exp.dropped[p] = size - _boundary_before(layout, first)
        exp.detail = f"{kind} of {os.path.basename(active)} of {TOPIC}-{p} from byte {first}"
    elif kind in ("truncate_index", "truncate_timeindex", "delete_index", "flip_index"):
        seg = rnd.choice(segs)
        ext = ".timeindex" if kind == "truncate_timeindex" or rnd.random() < 0.3 else ".index"
        if kind == "truncate_index":
            ext = ".index"
        path = seg[:-4] + ext
        isize = os.path.getsize(path)
        if kind == "delete_index":
            os.unlink(path)
        elif kind == "flip_index":
            if isize == 0:
                return damage(kind, case_dir, base, rnd)
            with open(path, "r+b") as f:
                i = rnd.randrange(isize)
                f.seek(i)
                b = f.read(1)[0]
                f.seek(i)
                f.write(bytes([b ^ (1 << rnd.randrange(8))]))
        else:
            os.truncate(path, rnd.randrange(0, isize + 1))
        exp.detail = f"{kind} {os.path.basename(path)} of {TOPIC}-{p} (was {isize} bytes)"
        k = segs.index(seg)
        upto = int(os.path.basename(segs[k + 1])[:20]) if k + 1 < len(segs) else leo[p]
        exp.probe = (p, int(os.path.basename(seg)[:20]), upto)
    elif kind == "tmp_state":
        meta = os.path.join(case_dir, ".kafkalite", "topics")
        with open(os.path.join(meta, ".tmp-0123456789abcdef0123456789abcdef"), "wb") as f:
            f.write(b'{"name": "' + TOPIC.encode() + b'", "topic_id": "12')
        with open(os.path.join(meta, TOPIC + ".json.tmp"), "wb") as f:
            f.write(b'{"name": "half')
        with open(os.path.join(pdir, "%020d.snapshot.tmp" % leo[p]), "wb") as f:
            f.write(b"\x00\x01\x12\x34")
        with open(os.path.join(pdir, "log-start-offset.tmp"), "wb") as f:
            f.write(b"99")
        exp.detail = f"half-written .tmp files in the topic metadata and {TOPIC}-{p}"
    elif kind == "torn_snapshot":  # the newest producer snapshot, the shutdown's
        snap = max(n for n in os.listdir(pdir) if n.endswith(".snapshot"))
        n = os.path.getsize(os.path.join(pdir, snap))
        os.truncate(os.path.join(pdir, snap), rnd.randrange(0, max(n, 1)))
        exp.detail = f"{snap} of {TOPIC}-{p} cut to fewer than {n} bytes"
    else:
        raise ValueError(kind)
    return exp


def _survivors_leo_before(layout, first: int, seg: str) -> int:
    """Log end offset when `seg` (the last segment) keeps only whole batches below byte
    `first`."""
    leo = int(os.path.basename(seg)[:20])
    for pos, size, _b, last in layout:
        if pos + size <= first:
            leo = last + 1
    return leo


def _boundary_before(layout, first: int) -> int:
    end = 0
    for pos, size, _b, _l in layout:
        if pos + size <= first:
            end = pos + size
    return end
