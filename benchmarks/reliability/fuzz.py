# Bad-input fuzzer over live sockets.
#
#   python -m benchmarks.reliability.fuzz --cases 20000
#
# Each case opens a connection, sends one hostile frame (fuzz_cases.py: random frames, bad
# lengths, truncated frames, requests of every advertised key and version with mutated
# bytes or headers, unknown tagged fields, Produce batches invalid in one way) followed by
# a well-formed ApiVersions "probe", and classifies what came back: the fuzzed request
# answered, the connection closed, or silence (nothing within --case-timeout). A case
# violates the expectation its generator attached (a valid request with unknown tagged
# fields must be answered; an invalid batch must get an error code; a bad frame length must
# close the connection). Every --check-every cases: the broker process must be alive, answer
# ApiVersions and Metadata on a fresh connection, and its RSS is sampled; every 10 checks
# and at the end, a canary topic produced at the start must read back intact (CRC-checked,
# byte-identical). At the end the whole `fuzz` topic is read back: every batch the broker
# accepted must pass CRC and decode with kafka-python.
from __future__ import annotations

import argparse
import os
import random
import re
import socket
import struct
import sys
import tempfile
import shutil
import time
from collections import Counter

from compat_tests.wire import response_class

from kafka.record.default_records import DefaultRecordBatch

from .common import (Broker, Conn, CorruptBatchServed, build_batch, check_batch_crc, emit,
                     create_topic, fetch_range, fetch_raw, list_offsets, produce_batch)
from .fuzz_cases import (CID, FUZZ_TOPIC, Requests, bad_batch, has_huge_varint,
                         header_mutation, mutated_request, raw_frames, tagged_fields, truncated)

PROBE_CID = 0x0BADCAFE
PROBE = struct.pack(">ihhih", 10, 18, 0, PROBE_CID, -1)  # ApiVersions v0, null client id
CANARY = "canary"
GENERATORS = ((mutated_request, 40), (header_mutation, 10), (tagged_fields, 10),
              (bad_batch, 20), (raw_frames, 10), (truncated, 10))


def _recv_frames(sock: socket.socket, timeout: float) -> tuple[list[bytes], str]:
    """Frames until the probe's answer ('probe'), EOF ('closed') or the timeout ('silent')."""
    frames: list[bytes] = []
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        while len(buf) >= 4:
            (n,) = struct.unpack_from(">i", buf, 0)
            if len(buf) < 4 + n:
                break
            frame = bytes(buf[4:4 + n])
            del buf[:4 + n]
            frames.append(frame)
            if frame[:4] == struct.pack(">i", PROBE_CID):
                return frames, "probe"
        left = deadline - time.monotonic()
        if left <= 0:
            return frames, "silent"
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return frames, "silent"
        except (ConnectionResetError, BrokenPipeError):
            return frames, "closed"
        if not chunk:
            return frames, "closed"
        buf += chunk


def run_case(port: int, frame: bytes, expect: str, timeout: float) -> tuple[str, str | None]:
    """(outcome, violation or None)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(frame)
            if expect == "eof":
                s.shutdown(socket.SHUT_WR)
            else:
                s.sendall(PROBE)
        except (BrokenPipeError, ConnectionResetError):
            return "closed", None
        frames, end = _recv_frames(s, timeout)
    answered = any(f[:4] == struct.pack(">i", CID) for f in frames)
    outcome = "answered" if answered else end
    if expect == "answer" and not answered:
        return outcome, "a valid request was not answered"
    if expect == "closed" and end != "closed":
        return outcome, "an out-of-range frame length did not close the connection"
    if expect in ("error", "any") and answered and frame[4:6] == b"\x00\x00" \
            and frames[0][:4] == struct.pack(">i", CID):
        version = struct.unpack_from(">h", frame, 6)[0]
        try:
            resp = response_class(0)[version].decode(frames[0], header=True)
            code = resp.responses[0].partition_responses[0].error_code
        except Exception:  # a mutated Produce answered in a shape kafka-python rejects
            return "answered:undecodable", None
        if code == 0:
            return "accepted", "an invalid batch was acknowledged" if expect == "error" \
                else None
        return f"error:{code}", None
    return outcome, None


def health(broker: Broker) -> None:
    if not broker.alive():
        raise AssertionError("the broker process exited:\n" + broker.read_log()[-3000:])
    with Conn(broker.bootstrap, timeout=10.0) as c:
        assert c.call(18, 3, {"client_software_name": "fuzz",
                              "client_software_version": "1.0"}).error_code == 0
        md = c.call(3, 9, {"topics": [{"name": CANARY}], "allow_auto_topic_creation": False})
        assert md.topics[0].error_code == 0, md


def canary_intact(broker: Broker, sent: list[tuple[bytes, bytes]]) -> bool:
    with Conn(broker.bootstrap, timeout=10.0) as c:
        recs = fetch_range(c, CANARY, 0, 0, len(sent))
        return [(r.key, r.value) for r in recs] == sent \
            and list_offsets(c, CANARY, [0])[0] == len(sent)


def read_back_fuzz_topic(broker: Broker) -> dict:
    """Every batch the broker accepted into `fuzz`, walked batch by batch: each must pass
    CRC32C; count those kafka-python cannot decode (a batch a consumer would choke on)."""
    out: Counter = Counter()
    with Conn(broker.bootstrap, timeout=30.0) as c:
        end = list_offsets(c, FUZZ_TOPIC, [0])[0]
        offset = 0
        while offset < end:
            data = fetch_raw(c, FUZZ_TOPIC, 0, offset, 1 << 20)
            pos = 0
            while pos + 61 <= len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > len(data):
                    break
                batch = data[pos:pos + 12 + length]
                out["batches"] += 1
                try:
                    check_batch_crc(batch, 0, len(batch))
                except CorruptBatchServed:
                    out["crc_mismatch_served"] += 1
                try:
                    n = len(list(DefaultRecordBatch(batch)))
                    out["records"] += n
                except Exception as e:
                    out["undecodable_batches"] += 1
                    out[f"undecodable:{type(e).__name__}"] += 1
                offset = base + struct.unpack_from(">i", batch, 23)[0] + 1
                pos += 12 + length
            if pos == 0:
                raise AssertionError(f"fuzz-0@{offset}: no whole batch served")
    return dict(out)


def _where(tb: str) -> str:
    """'<last kafkalite frame>: <exception line>' of a logged traceback."""
    lines = tb.strip().splitlines()
    frames = [ln.strip() for ln in lines if ln.strip().startswith('File "') and "kafkalite" in ln]
    return (frames[-1].split("kafkalite/", 1)[-1] if frames else "?") + " :: " + lines[-1]


def run(cases: int, seed: int = 1, check_every: int = 100, case_timeout: float = 1.0,
        progress: bool = False, leave_out_huge_varints: bool = False) -> dict:
    rnd = random.Random(seed)
    d = tempfile.mkdtemp(prefix="kafkalite-fuzz-")
    broker = Broker(data_dir=d)
    counts: Counter = Counter()
    outcomes: Counter = Counter()
    violations: Counter = Counter()
    batch_outcomes: Counter = Counter()
    recent: list[tuple[str, str]] = []
    huge = 0  # frames holding a 5-byte varint >= 2^28 (the kio-abort family)
    crash: dict | None = None
    examples: dict[str, str] = {}
    rss: list[float] = []
    t0 = time.monotonic()
    try:
        broker.start_measured()
        with Conn(broker.bootstrap) as c:
            create_topic(c, CANARY, 1)
            create_topic(c, FUZZ_TOPIC, 1)
            versions = {k.api_key: (k.min_version, k.max_version)
                        for k in c.call(18, 0).api_keys}
            topic_id = c.call(3, 12, {"topics": [{"name": FUZZ_TOPIC, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False}
                              ).topics[0].topic_id
            sent = [(b"canary-%d" % i, rnd.randbytes(100)) for i in range(50)]
            for i in range(0, 50, 10):
                assert produce_batch(c, CANARY, 0, build_batch(sent[i:i + 10]))[0] == 0
        reqs = Requests(versions, topic_id)
        rss.append(broker.rss_mb())
        gens = [g for g, _w in GENERATORS]
        weights = [w for _g, w in GENERATORS]
        canary_checks = 0
        for i in range(cases):
            gen = rnd.choices(gens, weights)[0]
            kind, frame, expect = gen(reqs, rnd) if gen is not raw_frames else gen(rnd)
            if leave_out_huge_varints and kind.split(":")[0] in ("mutated", "tagged", "header") \
                    and has_huge_varint(frame):
                counts["left_out:huge_varint"] += 1
                continue
            counts[kind.split(":")[0]] += 1
            huge += has_huge_varint(frame)
            counts[kind] += 1
            try:
                outcome, bad = run_case(broker.port, frame, expect, case_timeout)
            except OSError as e:
                outcome, bad = "connect_failed", f"could not connect: {e}"
            outcomes[outcome] += 1
            if kind.startswith("batch:"):
                batch_outcomes[f"{kind} -> {outcome}"] += 1
            if bad:
                violations[f"{kind}: {bad}"] += 1
                examples.setdefault(f"{kind}: {bad}", frame[:200].hex())
            recent.append((kind, frame[:4096].hex()))
            del recent[:-20]
            if not broker.alive():
                log_copy = os.path.join(tempfile.gettempdir(), f"kafkalite-fuzz-crash-{seed}.log")
                shutil.copy(broker.log_path, log_copy)
                text = broker.read_log()
                at = max(text.rfind("panicked"), text.rfind("Traceback"), 0)
                crash = {"after_case": i, "log": log_copy, "log_excerpt": text[at - 300:at + 1500],
                         "last_frames": recent}
                break
            if (i + 1) % check_every == 0 or i + 1 == cases:
                health(broker)
                rss.append(broker.rss_mb())
                if (i + 1) % (check_every * 10) == 0:
                    canary_checks += 1
                    assert canary_intact(broker, sent), "canary topic changed"
                if progress:
                    print(f"{i + 1}/{cases} rss={rss[-1]:.1f}MB outcomes={dict(outcomes)} "
                          f"violations={sum(violations.values())}", file=sys.stderr, flush=True)
        if crash is not None:
            return {"cases": i + 1, "broker_crashes": 1, "crash": crash,
                    "by_kind": dict(counts), "outcomes": dict(outcomes),
                    "violations": dict(violations), "canary_intact": False}
        health(broker)
        canary_ok = canary_intact(broker, sent)
        log = broker.read_log()
        tracebacks = re.findall(r"Unexpected error handling a request.*\n((?:[ T].*\n|\w+.*\n)*?)"
                                r"(?=\d{4}-\d\d-\d\d |\Z)", log)
        internal = Counter(_where(tb) for tb in tracebacks if tb.strip())
        return {"cases": cases, "cases_sent": cases - counts["left_out:huge_varint"],
                "huge_varint_frames": huge,
                "by_kind": {k: v for k, v in sorted(counts.items())},
                "outcomes": dict(outcomes), "violations": dict(violations),
                "violation_examples": examples, "broker_crashes": 0 if broker.alive() else 1,
                "internal_errors": len(re.findall("Unexpected error handling a request", log)),
                "internal_error_kinds": dict(internal),
                "internal_error_tracebacks": list({_where(tb): tb for tb in tracebacks
                                                   if tb.strip()}.values())[:8],
                "batch_outcomes": dict(sorted(batch_outcomes.items())),
                "canary_intact": canary_ok, "canary_checks": canary_checks + 1,
                "fuzz_topic": read_back_fuzz_topic(broker),
                "rss_mb_start": round(rss[0], 1), "rss_mb_max": round(max(rss), 1),
                "rss_mb_end": round(rss[-1], 1),
                "versions_covered": len(reqs.pairs), "versions_skipped": reqs.skipped,
                "wall_s": round(time.monotonic() - t0, 1)}
    finally:
        broker.kill()
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fuzz the broker over live sockets.")
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check-every", type=int, default=100)
    ap.add_argument("--leave-out-huge-varints", action="store_true",
                    help="skip frames with 5-byte varints >= 2^28 (needed before 9004939)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    r = run(args.cases, args.seed, args.check_every, progress=True,
            leave_out_huge_varints=args.leave_out_huge_varints)
    emit(r, args.json)
    return 0 if r["broker_crashes"] == 0 and r["canary_intact"] else 1


if __name__ == "__main__":
    sys.exit(main())
