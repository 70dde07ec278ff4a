# __consumer_offsets under many groups: each of GROUPS groups commits two partitions ROUNDS
# times with large commit metadata (raw OffsetCommit v7, pipelined on one connection), the
# log cleaner compacts __consumer_offsets down to about one batch per group (its size is
# bounded by the live keys, not by the commits made), then a SIGKILL and a restart replay
# the cleaned log: OffsetFetch (v8, many groups per request) gives every group's last
# committed offset and metadata exactly. 2000 groups here; 100k groups with 4000-byte
# metadata behind KAFKALITE_LONG=1:
#
#   KAFKALITE_LONG=1 .venv/bin/python -m pytest -s tests/reliability/test_offsets_stress.py
from __future__ import annotations

import glob
import os
import time

from kafkalite.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import create_topic
from tests.integration.test_groups_helpers import RawClient

LONG = os.environ.get("KAFKALITE_LONG") == "1"
GROUPS = 100_000 if LONG else 2000
ROUNDS = 3
METADATA = 4000 if LONG else 1000  # offset.metadata.max.bytes is 4096
PARTITIONS = 4
SEGMENT_BYTES = (4 << 20) if LONG else (256 << 10)
DIRTY_RATIO = 0.2  # log.cleaner.min.cleanable.ratio: the bound below depends on it
SETTINGS = {"offsets.topic.num.partitions": str(PARTITIONS),
            "offsets.topic.segment.bytes": str(SEGMENT_BYTES), "log.cleaner.backoff.ms": "200",
            "log.cleaner.min.cleanable.ratio": str(DIRTY_RATIO)}
WINDOW = 200  # requests in flight on the connection
DEADLINE_S = 1800 if LONG else 180
FETCH_BATCH = 100  # groups per OffsetFetch v8
COORDINATOR_LOAD_IN_PROGRESS = 14
TOPIC = "stressed"


def group(i: int) -> str:
    return f"stress-group-{i:06d}"


def committed(i: int, r: int) -> dict[int, tuple[int, str]]:
    """Partition -> (offset, metadata) group i commits in round r."""
    return {p: (r * 10_000_000 + i * 2 + p, (f"{i}/{r}/{p}:" + "m" * METADATA)[:METADATA])
            for p in (0, 1)}


def commit_all(raw: RawClient) -> None:
    m = raw.schema(8, 7)
    deadline = time.monotonic() + DEADLINE_S
    sent = 0

    def drain(keep: int) -> None:
        while len(raw.pending) > keep:
            resp = raw.recv()
            codes = {p.error_code for t in resp.topics for p in t.partitions}
            assert codes == {0}, codes

    for r in range(ROUNDS):
        for i in range(GROUPS):
            parts = tuple(m.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                         committed_metadata=meta)
                          for p, (o, meta) in committed(i, r).items())
            raw.send(8, 7, group_id=group(i), generation_id_or_member_epoch=-1, member_id="",
                     group_instance_id=None,
                     topics=(m.OffsetCommitRequestTopic(name=TOPIC, partitions=parts),))
            sent += 1
            drain(WINDOW)
            assert time.monotonic() < deadline, f"{sent} commits in {DEADLINE_S} s"
    drain(0)


def fetch_all(bootstrap: str) -> dict[str, dict[int, tuple[int, str]]]:
    """Every group's committed offsets, OffsetFetch v8, retried while the coordinator loads."""
    raw = RawClient(bootstrap)
    m = raw.schema(9, 8)
    out: dict[str, dict[int, tuple[int, str]]] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        names = [group(i) for i in range(GROUPS)]
        while names:
            assert time.monotonic() < deadline, f"{len(names)} groups not fetched"
            batches = [names[k:k + FETCH_BATCH] for k in range(0, len(names), FETCH_BATCH)]
            for b in batches:
                raw.send(9, 8, require_stable=False, groups=tuple(
                    m.OffsetFetchRequestGroup(group_id=g, topics=None) for g in b))
            loading = []
            for _ in batches:
                for g in raw.recv().groups:
                    if g.error_code == COORDINATOR_LOAD_IN_PROGRESS:
                        loading.append(g.group_id)
                        continue
                    assert g.error_code == 0, (g.group_id, g.error_code)
                    out[g.group_id] = {p.partition_index: (p.committed_offset, p.metadata)
                                       for t in g.topics for p in t.partitions}
            names = loading
            if names:
                time.sleep(0.5)
    finally:
        raw.close()
    return out


def offsets_log_bytes(data_dir: str) -> int:
    total = 0
    for path in glob.glob(os.path.join(data_dir, "**", f"{OFFSETS_TOPIC}-*", "*.log"),
                          recursive=True):
        try:
            total += os.path.getsize(path)
        except FileNotFoundError:
            pass  # replaced by the cleaner between the listing and the stat
    return total


def test_offsets_of_many_groups_cleaned_and_replayed(tmp_path):
    with BrokerProcess(data_dir=str(tmp_path / "data"), settings=SETTINGS) as broker:
        stress(broker)


def stress(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    raw = RawClient(broker.bootstrap)
    started = time.monotonic()
    try:
        commit_all(raw)
    finally:
        raw.close()
    print(f"{GROUPS * ROUNDS} commits of {GROUPS} groups in {time.monotonic() - started:.1f} s")
    # Cleaned, a partition holds about one batch of two records per live group (each commit
    # is one batch; a generous allowance for the key and value framing); what was written
    # since is dirty and waits for the dirty ratio (dirty / total <= the ratio); the
    # active segments are never cleaned.
    per_group = 61 + 2 * (METADATA + len(group(0)) + len(TOPIC) + 100)
    bound = int(GROUPS * per_group / (1 - DIRTY_RATIO)) + PARTITIONS * SEGMENT_BYTES
    written = ROUNDS * GROUPS * (61 + 2 * (METADATA + len(group(0)) + len(TOPIC) + 40))
    assert written > 1.5 * bound  # what the commits wrote is well past the bound
    deadline = time.monotonic() + DEADLINE_S
    size = offsets_log_bytes(broker.data_dir)
    while size > bound and time.monotonic() < deadline:
        time.sleep(1)
        size = offsets_log_bytes(broker.data_dir)
    assert size <= bound, f"__consumer_offsets holds {size} bytes, bound {bound}"
    print(f"__consumer_offsets: {written} bytes committed, {size} on disk after cleaning "
          f"(bound {bound}) {time.monotonic() - started:.1f} s after the first commit")
    expected = {group(i): committed(i, ROUNDS - 1) for i in range(GROUPS)}
    assert fetch_all(broker.bootstrap) == expected
    broker.restart(hard=True)  # SIGKILL: the cleaned log is replayed at start
    restarted = time.monotonic()
    assert fetch_all(broker.bootstrap) == expected
    print(f"restart and OffsetFetch of every group: {time.monotonic() - restarted:.1f} s")
    assert offsets_log_bytes(broker.data_dir) <= bound
