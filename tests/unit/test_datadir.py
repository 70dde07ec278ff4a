# The data directory (kafkalite/log/datadir.py and LogManager.open/close): one broker at a
# time (.lock), a directory that is not kafkalite's is refused, nothing unknown is ever
# deleted, partition.metadata as Kafka writes it, and the clean-shutdown marker.
from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.log import datadir
from kafkalite.log.manager import CLEAN_SHUTDOWN_MARKER, LogManager
from kafkalite.wire.records import validate_produce_batch

from tests.helpers.dirtree import tree, user_files, wait_gone
from tests.helpers.kbatch import simple_batch

# partition.metadata of a topic created on Apache Kafka 3.8.0 (serve.sh, KRaft), read from its
# data directory, with the topic id its Admin client reported (describe_topics).
KAFKA_38_PARTITION_METADATA = b"version: 0\ntopic_id: 00_sscE2T4eCRhsrd4YrUg"
KAFKA_38_TOPIC_ID = uuid.UUID("d34fecb1-c136-4f87-8246-1b2b77862b52")


def manager(path, **settings) -> LogManager:
    return LogManager(BrokerConfig({"log.dirs": str(path), **settings}))


def opened(path, **settings) -> LogManager:
    m = manager(path, **settings)
    m.open()
    return m


def append(m: LogManager, topic: str, partition: int, n: int = 3) -> None:
    batch = simple_batch(n)
    m.partition(topic, partition).append(batch, validate_produce_batch(batch, 1 << 30))


def test_one_manager_at_a_time_and_only_the_holder_writes_the_marker(tmp_path):
    first = opened(tmp_path)
    second = manager(tmp_path)
    with pytest.raises(datadir.DataDirError) as refused:
        second.open()
    assert str(tmp_path) in str(refused.value) and ".lock" in str(refused.value)
    second.close(clean=True)  # a broker that never got the directory cannot call it clean
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_MARKER)
    first.close(clean=True)
    assert os.path.exists(tmp_path / CLEAN_SHUTDOWN_MARKER)
    # A start that fails after taking the lock (here: another cluster's directory) frees it.
    with pytest.raises(ConfigError):
        opened(tmp_path, **{"cluster.id": "someone-else"})
    opened(tmp_path).close()


def test_a_directory_that_is_not_kafkalites_is_refused_and_left_untouched(tmp_path):
    user_files(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(datadir.DataDirError) as refused:
        opened(tmp_path)
    assert str(tmp_path) in str(refused.value) and "meta.properties" in str(refused.value)
    assert tree(tmp_path) == before  # not even a .lock or a meta.properties


def test_empty_means_nothing_but_hidden_entries_and_lost_found(tmp_path):
    # The choice: a fresh file system's root (lost+found) or a directory holding only hidden
    # entries (.gitkeep) is empty and becomes a data directory; lost+found stays as it was.
    os.makedirs(tmp_path / "lost+found")
    (tmp_path / "lost+found" / "#12").write_bytes(b"fsck found this")
    (tmp_path / ".gitkeep").write_bytes(b"")
    m = opened(tmp_path)
    m.create_topic("t", 1)
    m.close()
    m = opened(tmp_path)
    assert m.get("t") is not None
    m.close()
    assert (tmp_path / "lost+found" / "#12").read_bytes() == b"fsck found this"
    assert (tmp_path / "meta.properties").exists()


def test_unknown_entries_survive_a_restart_and_deleted_topics_leftovers_do_not(tmp_path):
    m = opened(tmp_path)
    m.create_topic("t", 2)
    append(m, "t", 1)
    m.close()
    user_files(tmp_path)
    os.makedirs(tmp_path / "foo-0")  # looks like a partition, of no topic kafkalite knows
    (tmp_path / "foo-0" / "00000000000000000000.log").write_bytes(b"someone's bytes")
    os.makedirs(tmp_path / "t-7")  # beyond t's partition count
    leftover = tmp_path / f"x-0.{uuid.uuid4().hex}-delete"
    os.makedirs(leftover)
    (leftover / "00000000000000000000.log").write_bytes(b"a deleted topic's records")
    keep = {k: v for k, v in tree(tmp_path).items() if not k.startswith(leftover.name)}
    m = opened(tmp_path)
    assert m.partition("t", 1).log_end_offset == 3
    m.close()
    assert wait_gone(leftover)
    after = tree(tmp_path)
    for path in ("lost+found", "photos", "photos/cat.jpg", "notes.txt", "foo-0",
                 "foo-0/00000000000000000000.log", "t-7"):
        assert after[path] == keep[path], path


def test_a_lost_topic_metadata_file_leaves_the_partitions_on_disk(tmp_path):
    m = opened(tmp_path)
    old_id = m.create_topic("t", 2).topic_id
    append(m, "t", 0)
    m.close()
    os.unlink(tmp_path / ".kafkalite" / "topics" / "t.json")
    before = {k: v for k, v in tree(tmp_path).items() if k.startswith("t-")}
    m = opened(tmp_path)
    assert m.get("t") is None
    after = tree(tmp_path)
    assert {k: after[k] for k in before} == before
    # The name is free again; the old directories are set aside, not adopted or deleted.
    new = m.create_topic("t", 2)
    assert new.partitions[0].log_end_offset == 0
    aside = sorted(n for n in os.listdir(tmp_path) if n.startswith("t-0.") and
                   n.endswith("-stray"))
    assert len(aside) == 1
    assert datadir.read_partition_metadata(str(tmp_path / aside[0])) == old_id
    assert {k.replace(aside[0], "t-0", 1): v for k, v in tree(tmp_path).items()
            if k.startswith(aside[0])} == {k: v for k, v in before.items() if
                                           k.startswith("t-0")}
    m.close()


def test_partition_metadata_is_written_as_kafka_writes_it(tmp_path):
    kafka_dir = tmp_path / "kafka-t-0"
    os.makedirs(kafka_dir)
    (kafka_dir / "partition.metadata").write_bytes(KAFKA_38_PARTITION_METADATA)
    assert datadir.read_partition_metadata(str(kafka_dir)) == KAFKA_38_TOPIC_ID
    ours = tmp_path / "ours"
    os.makedirs(ours)
    datadir.write_partition_metadata(str(ours), KAFKA_38_TOPIC_ID)
    assert (ours / "partition.metadata").read_bytes() == KAFKA_38_PARTITION_METADATA

    m = opened(tmp_path / "data")
    topic = m.create_topic("created", 2)
    asyncio.run(m.add_partitions_async("created", 3))
    m.close()
    b64 = base64.urlsafe_b64encode(topic.topic_id.bytes).rstrip(b"=")
    for p in range(3):
        written = (tmp_path / "data" / f"created-{p}" / "partition.metadata").read_bytes()
        assert written == b"version: 0\ntopic_id: " + b64


def test_partition_dirs_of_an_older_kafkalite_get_partition_metadata(tmp_path):
    m = opened(tmp_path)
    topic_id = m.create_topic("old", 2).topic_id
    append(m, "old", 1)
    m.close()
    for p in range(2):  # as an older kafkalite left them
        os.unlink(tmp_path / f"old-{p}" / "partition.metadata")
    (tmp_path / "old-0" / "partition.metadata").write_bytes(b"")  # or torn by a power loss
    m = opened(tmp_path)
    assert m.partition("old", 1).log_end_offset == 3
    m.close()
    for p in range(2):
        assert datadir.read_partition_metadata(str(tmp_path / f"old-{p}")) == topic_id


def test_a_partition_dir_of_another_topic_id_is_set_aside_not_adopted(tmp_path):
    m = opened(tmp_path)
    m.create_topic("t", 1)
    append(m, "t", 0)
    m.close()
    other = uuid.uuid4()
    datadir.write_partition_metadata(str(tmp_path / "t-0"), other)
    before = tree(tmp_path / "t-0")
    m = opened(tmp_path)
    assert m.partition("t", 0).log_end_offset == 0
    m.close()
    aside = [n for n in os.listdir(tmp_path) if re.fullmatch(r"t-0\.[0-9a-f]{32}-stray", n)]
    assert len(aside) == 1 and tree(tmp_path / aside[0]) == before
    m = opened(tmp_path)  # and it stays there
    m.close()
    assert os.path.isdir(tmp_path / aside[0])


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_marker_unlink_is_followed_by_a_directory_fsync(tmp_path):
    data = tmp_path / "data"
    m = opened(data)
    m.create_topic("t", 1)
    m.close()
    assert os.path.exists(data / CLEAN_SHUTDOWN_MARKER)
    trace = tmp_path / "trace"
    script = ("import sys\nfrom kafkalite.config import BrokerConfig\n"
              "from kafkalite.log.manager import LogManager\n"
              "m = LogManager(BrokerConfig({'log.dirs': sys.argv[1]}))\nm.open()\n"
              "m.close(clean=False)\n")
    r = subprocess.run(["strace", "-qq", "-o", str(trace), "-e", "trace=openat,unlink,unlinkat,fsync",
                        sys.executable, "-c", script, str(data)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "ptrace" in r.stderr:
        pytest.skip(f"strace cannot trace here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(data / CLEAN_SHUTDOWN_MARKER)
    calls = trace.read_text().splitlines()
    unlinked = [i for i, c in enumerate(calls)
                if c.startswith(("unlink(", "unlinkat(")) and CLEAN_SHUTDOWN_MARKER in c]
    assert len(unlinked) == 1
    after = calls[unlinked[0] + 1:]
    dir_open = re.compile(rf'openat\(AT_FDCWD, "{re.escape(str(data))}", .*\) = (\d+)$')
    fds = [m.group(1) for c in after if (m := dir_open.match(c))]
    assert fds and any(c.startswith(f"fsync({fds[0]})") for c in after), \
        "no fsync of the data directory after the marker's unlink"
