# `kafkalite dump-log` on segment files the broker wrote, and on damaged copies of them.
from __future__ import annotations

import json
import os
import shutil

from .conftest import assert_one_error_line, run_cli

SEGMENT = "00000000000000000000"


def _produce_and_stop(broker_process, topic: str) -> str:
    """Write two batches (plain keyed lines, then JSON records) and return the partition dir."""
    bootstrap = ("--bootstrap-server", broker_process.bootstrap)
    r = run_cli("topics", "create", "--topic", topic, "--partitions", "1", *bootstrap)
    assert r.code == 0, r.err
    r = run_cli("produce", "--topic", topic, "--key-separator", ":", "--header", "h=v",
                *bootstrap, stdin="k1:hello\nk2:world\n")
    assert r.code == 0, r.err
    records = [{"key": "bin", "value": "line\nbreak\u0001", "headers": {"a": "1", "b": "2"}},
               {"value": "x" * 500}]
    r = run_cli("produce", "--topic", topic, "--format", "json", *bootstrap,
                stdin="".join(json.dumps(x) + "\n" for x in records))
    assert r.code == 0, r.err
    broker_process.stop()  # the files are complete and no longer change
    return os.path.join(broker_process.data_dir, f"{topic}-0")


def test_dump_segment_text_and_json(broker_process, tmp_path):
    part_dir = _produce_and_stop(broker_process, "dumped")
    log = os.path.join(part_dir, f"{SEGMENT}.log")

    r = run_cli("dump-log", log, "--max-value-chars", "20")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"Dumping {log}" and lines[1] == "Log starting offset: 0"
    batches = [line for line in lines if line.startswith("baseOffset:")]
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(batches) == 2 and len(records) == 4
    assert batches[0].startswith("baseOffset: 0 lastOffset: 1 count: 2 ")
    assert batches[1].startswith("baseOffset: 2 lastOffset: 3 count: 2 ")
    assert all(" isvalid: true" in b and "magic: 2" in b for b in batches)
    assert all(" deleteHorizonMs: OptionalLong.empty position: " in b for b in batches)
    assert "position: 0 " in batches[0]
    assert records[0].startswith("| offset: 0 CreateTime: ")
    assert records[0].endswith("headerKeys: [h] headers: h=v key: k1 payload: hello")
    assert records[2].endswith("headerKeys: [a, b] headers: a=1,b=2 key: bin "
                               "payload: line\\nbreak\\x01")
    assert records[3].endswith("key: null payload: " + "x" * 20 + "... (500 bytes)")
    assert lines[-1] == f"2 batches, 4 records, {os.path.getsize(log)} bytes"

    r = run_cli("dump-log", log, "--json", "--max-value-chars", "0")
    assert r.code == 0, r.err
    dumped = [json.loads(line) for line in r.out.splitlines()]
    assert [b["base_offset"] for b in dumped] == [0, 2]
    assert all(b["crc_valid"] and b["compression"] == "none" for b in dumped)
    assert dumped[1]["position"] == dumped[0]["size"]
    rec = dumped[1]["records"]
    assert rec[0]["key"] == "bin" and rec[0]["value"] == "line\nbreak\u0001"
    assert rec[0]["headers"] == [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]
    assert rec[1]["value"] == "x" * 500 and rec[1]["key"] is None

    r = run_cli("dump-log", os.path.join(part_dir, f"{SEGMENT}.index"),
                os.path.join(part_dir, f"{SEGMENT}.timeindex"), "--batches-only")
    assert r.code == 0, r.err
    assert f"Dumping {part_dir}/{SEGMENT}.index" in r.out
    assert "offset: 0 position: 0" in r.out

    # the partition directory, one line per segment
    r = run_cli("dump-log", part_dir, "--summary")
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        f"{log} baseOffset: 0 lastOffset: 3 records: 4 batches: 2 "
        f"size: {os.path.getsize(log)} missingOffsets: 0",
        f"1 segment, 4 records, {os.path.getsize(log)} bytes"]
    r = run_cli("dump-log", part_dir, "--summary", "--json")
    assert json.loads(r.out) == {"file": log, "base_offset": 0, "last_offset": 3,
                                 "records": 4, "batches": 2, "size": os.path.getsize(log),
                                 "invalid_bytes": 0, "missing_offsets": 0}

    # a flipped byte in the second batch's records: the CRC says so, the walk goes on
    damaged = tmp_path / f"{SEGMENT}.log"
    shutil.copy(log, damaged)
    data = bytearray(damaged.read_bytes())
    data[dumped[1]["position"] + 70] ^= 0xFF
    damaged.write_bytes(bytes(data))
    r = run_cli("dump-log", str(damaged), "--json", "--batches-only")
    assert [b["crc_valid"] for b in map(json.loads, r.out.splitlines())] == [True, False]

    # a torn tail: the complete batch is shown, the rest reported as invalid bytes
    damaged.write_bytes(bytes(data[:dumped[1]["position"] + 30]))
    r = run_cli("dump-log", str(damaged))
    assert r.code == 0, r.err
    assert r.out.count("baseOffset:") == 1
    assert f"Found 30 invalid bytes at position {dumped[1]['position']}" in r.out


def test_missing_file(tmp_path):
    missing = str(tmp_path / "nope.log")
    r = run_cli("dump-log", missing)
    assert_one_error_line(r, 1, "error: cannot read", missing)


def test_empty_segment_says_zero_batches(tmp_path):
    empty = tmp_path / f"{SEGMENT}.log"
    empty.write_bytes(b"")
    r = run_cli("dump-log", str(empty))
    assert r.code == 0, r.err
    assert r.out.splitlines() == [f"Dumping {empty}", "Log starting offset: 0",
                                  "0 batches, 0 records, 0 bytes"]


def test_files_that_are_not_segments(tmp_path):
    readme = os.path.join(os.path.dirname(__file__), "conftest.py")
    garbage = tmp_path / f"{SEGMENT}.log"
    shutil.copy(readme, garbage)
    r = run_cli("dump-log", str(garbage))
    assert_one_error_line(r, 1, f"error: {garbage} is not a log segment",
                          "no record batch at position 0")
    for name in ("leader-epoch-checkpoint", "notes.txt", "orders-0"):
        other = tmp_path / name
        other.write_bytes(b"0\n1\n0 0\n")
        r = run_cli("dump-log", str(other))
        assert_one_error_line(r, 1, f"error: {other} is not a segment file")
    index = tmp_path / "copy.index"
    index.write_bytes(bytes(16))
    r = run_cli("dump-log", str(index))
    assert_one_error_line(r, 1, f"error: {index} is not a segment index")
