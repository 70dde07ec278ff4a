# Which partitions a cluster broker reports holding (issue 17): three kafkalite brokers and an
# RF=1 topic spread over them (partitions 0 and 3 on broker 1, 1 on broker 2, 2 on broker 3,
# the multi-core use). The log manager keeps a topic's partitions dense, so every broker has
# local placeholders for the partitions it does not host; DescribeLogDirs must list only its
# own replicas, as Kafka's does. Partition 3 then moves to broker 2 while broker 1 keeps
# partition 0: broker 1 stops listing it and its data is gone (Kafka's StopReplica
# delete=true); moved back, broker 1's replica is refilled from broker 2 and serves the same
# records. Requests for a partition broker 1 does not host (never, or no longer) get the
# answers recorded in `not_hosted` (test_hosted_replicas_vs_kafka.py compares all of it
# with Kafka 3.8 in ZooKeeper mode).
from __future__ import annotations

import datetime
import json
import os

from kafka.protocol.admin import CreateTopicsRequest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_reassignment import alter
from tests.cluster.test_zk_admin_apis import controller_id, states
from tests.helpers.kbatch import batch_headers, call, produce_raw, simple_batch
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually
from tests.integration.test_groups_helpers import RawClient

TOPIC = "spread"
PLACES = {0: [1], 1: [2], 2: [3], 3: [1]}
MOVED = 3
RECORDS = 5
SECOND = datetime.timedelta(seconds=1)


def create_spread(bootstrap: str) -> int:
    T = CreateTopicsRequest[7].CreatableTopic
    req = CreateTopicsRequest[7](topics=[T(
        name=TOPIC, num_partitions=-1, replication_factor=-1, assignments=[
            T.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
            for p, r in PLACES.items()], configs=[])], timeout_ms=15000, validate_only=False)
    with open_socket(bootstrap) as s:
        (row,) = call(s, req).topics
    return row.error_code


def placed(z: Zk, places: dict[int, list[int]]) -> dict:
    """Once the topic znode holds `places` with nothing moving and each partition's only
    replica leads it: the leaders."""
    def now():
        try:
            raw = json.loads(z.client.get(zkdata.topic_path(TOPIC))[0])
        except Exception:  # NoNodeError: not created yet
            return None
        if raw["partitions"] != {str(p): r for p, r in places.items()} or \
                raw.get("adding_replicas") or raw.get("removing_replicas"):
            return None
        st = states(z, TOPIC, places)
        return {p: s.leader for p, s in st.items()} if len(st) == len(places) else None
    want = {p: r[0] for p, r in places.items()}
    got = eventually(now, lambda n: n == want, timeout=WAIT_S)
    assert got == want, got
    return got


def log_dirs(bootstrap: str) -> list[tuple[int, int]]:
    """DescribeLogDirs v4, of all topics and of TOPIC's partitions 0-4 by name: TOPIC's
    (partition, size) listed, sorted (None when the two answers differ)."""
    c = RawClient(bootstrap)
    m = c.schema(35, 4)
    try:
        answers = [c.call(35, 4, topics=topics).results for topics in (None, (
            m.DescribableLogDirTopic(topic=TOPIC, partitions=tuple(range(5))),))]
    finally:
        c.close()
    listed = []
    for (res,) in answers:
        assert res.error_code == 0
        listed.append(sorted((p.partition_index, p.partition_size) for t in res.topics
                             if t.name == TOPIC for p in t.partitions))
    return listed[0] if listed[0] == listed[1] else None


def listings(procs: dict, places: dict[int, list[int]]) -> dict:
    """Each broker's DescribeLogDirs once it lists exactly the partitions `places` puts on
    it (Kafka creates and deletes logs asynchronously): {id: [(partition, size)]}."""
    out = {}
    for i, proc in sorted(procs.items()):
        mine = sorted(p for p, r in places.items() if i in r)
        out[i] = eventually(lambda: log_dirs(proc.bootstrap),
                            lambda got: got is not None and [p for p, _ in got] == mine,
                            timeout=WAIT_S)
    return out


DATA_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def data_bytes(proc, partition: int) -> int:
    """Bytes of the partition's segments, indexes and producer snapshots in its directory
    (kafkalite: <dir>/<t>-<p>, Kafka: <dir>/logs/<t>-<p>); 0 without a directory."""
    for d in (os.path.join(proc.data_dir, f"{TOPIC}-{partition}"),
              os.path.join(proc.data_dir, "logs", f"{TOPIC}-{partition}")):
        if os.path.isdir(d):
            return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                       if f.endswith(DATA_FILES))
    return 0


def not_hosted(bootstrap: str, partition: int) -> dict[str, str]:
    """The error names a broker without a replica of TOPIC-`partition` answers."""
    c = RawClient(bootstrap)
    try:
        m = c.schema(2, 7)
        lo = c.call(2, 7, replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
            name=TOPIC, partitions=(m.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=-1),)),))
        m = c.schema(23, 4)
        ep = c.call(23, 4, replica_id=-1, topics=(m.OffsetForLeaderTopic(
            topic=TOPIC, partitions=(m.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=-1, leader_epoch=0),)),))
        m = c.schema(1, 12)
        fe = c.call(1, 12, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                    max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                    topics=(m.FetchTopic(topic=TOPIC, partitions=(m.FetchPartition(
                        partition=partition, current_leader_epoch=-1, fetch_offset=0,
                        last_fetched_epoch=-1, log_start_offset=-1,
                        partition_max_bytes=1 << 20),)),),
                    forgotten_topics_data=(), rack_id="")
        m = c.schema(61, 0)
        dp = c.call(61, 0, topics=(m.TopicRequest(name=TOPIC, partition_indexes=(partition,)),))
        m = c.schema(21, 2)
        dr = c.call(21, 2, timeout=SECOND, topics=(m.DeleteRecordsTopic(
            name=TOPIC, partitions=(m.DeleteRecordsPartition(partition_index=partition,
                                                             offset=0),)),))
    finally:
        c.close()
    with open_socket(bootstrap) as s:
        pr = produce_raw(s, TOPIC, partition, simple_batch(1))
    codes = {"Produce": pr.error_code, "ListOffsets": lo.topics[0].partitions[0].error_code,
             "OffsetForLeaderEpoch": ep.topics[0].partitions[0].error_code,
             "Fetch": fe.responses[0].partitions[0].error_code,
             "DescribeProducers": dp.topics[0].partitions[0].error_code,
             "DeleteRecords": dr.topics[0].partitions[0].error_code}
    return {k: ErrorCode(int(v)).name for k, v in codes.items()}


def read_back(bootstrap: str, partition: int) -> int:
    """Records a consumer Fetch from offset 0 returns (0 on an error)."""
    from tests.helpers.kbatch import fetch_raw
    with open_socket(bootstrap) as s:
        r = fetch_raw(s, TOPIC, partition, 0)
    if r.error_code != 0 or not r.records:
        return 0
    return sum(h.records_count for h in batch_headers(r.records))


def scenario(procs: dict, z: Zk) -> list:
    seen: list = []
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    ctl = procs[cid].bootstrap
    assert eventually(lambda: create_spread(ctl), lambda c: c == 0, timeout=WAIT_S) == 0
    placed(z, PLACES)
    for p, (leader,) in PLACES.items():
        with open_socket(procs[leader].bootstrap, timeout=30) as s:
            seen.append((f"produce {p}", eventually(
                lambda: produce_raw(s, TOPIC, p, simple_batch(RECORDS)).error_code,
                lambda c: c == 0, timeout=WAIT_S)))
    seen.append(("listed", listings(procs, PLACES)))
    seen.append(("never hosted on 1", not_hosted(procs[1].bootstrap, 1)))
    moved = {**PLACES, MOVED: [2]}
    seen.append(("move away", alter(ctl, {(TOPIC, MOVED): [2]})))
    placed(z, moved)
    seen.append(("listed after the move", listings(procs, moved)))
    seen.append(("data left on 1", eventually(lambda: data_bytes(procs[1], MOVED),
                                              lambda n: n == 0, timeout=WAIT_S)))
    seen.append(("moved away from 1", not_hosted(procs[1].bootstrap, MOVED)))
    seen.append(("move back", alter(ctl, {(TOPIC, MOVED): [1]})))
    placed(z, PLACES)
    seen.append(("listed after the move back", listings(procs, PLACES)))
    seen.append(("read back on 1", eventually(lambda: read_back(procs[1].bootstrap, MOVED),
                                              lambda n: n == RECORDS, timeout=WAIT_S)))
    return seen


def test_describe_log_dirs_lists_only_the_hosted_replicas(brokers, zk):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3)))
    z = zk()
    registered(z, {1, 2, 3})
    seen = dict(scenario(procs, z))
    size = seen["listed"][2][0][1]
    assert size > 0
    assert seen["listed"] == {1: [(0, size), (3, size)], 2: [(1, size)], 3: [(2, size)]}
    assert seen["listed after the move"] == {1: [(0, size)], 2: [(1, size), (3, size)],
                                             3: [(2, size)]}
    assert seen["data left on 1"] == 0
    assert seen["listed after the move back"] == seen["listed"]
    assert seen["read back on 1"] == RECORDS
    for label in ("never hosted on 1", "moved away from 1"):
        assert set(seen[label].values()) == {"not_leader_or_follower"}, seen[label]
