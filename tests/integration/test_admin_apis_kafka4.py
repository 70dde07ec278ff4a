# The admin APIs Kafka 4.0 serves to clients that kafkalite added for issue 12:
# DescribeLogDirs (35), AlterReplicaLogDirs (34), ElectLeaders (43), AlterPartitionReassignments
# (45), ListPartitionReassignments (46), DescribeQuorum (55), DescribeTopicPartitions (75) with
# its cursor, ListOffsets v10 and GROUP config resources. Each check runs against kafkalite and
# a real Apache Kafka 3.8 (`any_broker`) with the same assertions, over raw requests (kio's
# schemas; Kafka decodes them, so they are the protocol). Kafka's own tools are compared in
# test_admin_tools_kafka4.py.
from __future__ import annotations

import datetime
import os
import uuid

import pytest

from tests.helpers.real_kafka import create_topic, eventually
from tests.integration.test_groups_helpers import RawClient

E = {"none": 0, "unknown": 3, "invalid_config": 40, "invalid_request": 42,
     "log_dir_not_found": 57, "invalid_topic": 17, "invalid_replica_assignment": 39,
     "election_not_needed": 84, "no_reassignment": 85}
SECOND = datetime.timedelta(seconds=1)


def _name(tag: str) -> str:
    return f"k4-{tag}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(any_broker):
    c = RawClient(any_broker)
    yield c
    c.close()


def _codes(results, name_attr, parts_attr, id_attr):
    return {(getattr(t, name_attr), getattr(p, id_attr)): int(p.error_code)
            for t in results for p in getattr(t, parts_attr)}


def _log_dir(c) -> str:
    r = c.call(35, 4, topics=None)
    assert len(r.results) == 1 and r.results[0].error_code == 0
    return r.results[0].log_dir


def test_describe_log_dirs(any_broker, client):
    topic = _name("dld")
    create_topic(any_broker, topic, partitions=3)
    # Kafka creates a partition's log once its broker applies the metadata: poll, bounded.
    eventually(lambda: client.call(35, 4, topics=None).results[0].topics,
               lambda ts: sum(len(t.partitions) for t in ts if t.name == topic) == 3)
    for v in (1, 4):
        r = client.call(35, v, topics=None)
        (res,) = r.results
        assert res.error_code == 0 and os.path.isabs(res.log_dir)
        mine = [t for t in res.topics if t.name == topic]
        assert len(mine) == 1
        assert sorted((p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                      for p in mine[0].partitions) == [(i, 0, 0, False) for i in range(3)]
        if v == 4:
            assert res.total_bytes >= res.usable_bytes > 0
    m = client.schema(35, 4)
    r = client.call(35, 4, topics=(m.DescribableLogDirTopic(topic=topic, partitions=(1, 7)),
                                   m.DescribableLogDirTopic(topic=_name("no"), partitions=(0,))))
    (res,) = r.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == \
        [(topic, [1])]


def test_alter_replica_log_dirs(any_broker, client):
    topic, missing = _name("arld"), _name("no")
    create_topic(any_broker, topic)
    m = client.schema(34, 2)
    topics = (m.AlterReplicaLogDirTopic(name=topic, partitions=(0, 9)),
              m.AlterReplicaLogDirTopic(name=missing, partitions=(0,)))
    for v in (1, 2):
        here = client.call(34, v, dirs=(m.AlterReplicaLogDir(path=_log_dir(client),
                                                             topics=topics),))
        assert _codes(here.results, "topic_name", "partitions", "partition_index") == {
            (topic, 0): E["none"], (topic, 9): E["unknown"], (missing, 0): E["unknown"]}
        elsewhere = client.call(34, v, dirs=(m.AlterReplicaLogDir(path="/nonexistent/dir",
                                                                  topics=topics),))
        assert set(_codes(elsewhere.results, "topic_name", "partitions",
                          "partition_index").values()) == {E["log_dir_not_found"]}


def test_elect_leaders_not_needed(any_broker, client):
    topic, missing = _name("el"), _name("no")
    create_topic(any_broker, topic, partitions=2)
    m = client.schema(43, 2)
    for v in (0, 1, 2):
        fields = dict(topic_partitions=(m.TopicPartitions(topic=topic, partitions=(0, 1, 9)),
                                        m.TopicPartitions(topic=missing, partitions=(0,))),
                      timeout=SECOND)
        if v >= 1:
            fields["election_type"] = 0
        r = client.call(43, v, **fields)
        assert v == 0 or r.error_code == 0
        got = [(t.topic, p.partition_id, int(p.error_code), p.error_message)
               for t in r.replica_election_results for p in t.partition_result]
        assert got == [
            (topic, 0, E["election_not_needed"], "Leader election not needed for topic partition."),
            (topic, 1, E["election_not_needed"], "Leader election not needed for topic partition."),
            (topic, 9, E["unknown"], f"No such partition as {topic}-9"),
            (missing, 0, E["unknown"], f"No such topic as {missing}")]
    # Unclean elections are not needed either where the leader is alive.
    r = client.call(43, 2, election_type=1, timeout=SECOND,
                    topic_partitions=(m.TopicPartitions(topic=topic, partitions=(0,)),))
    assert r.replica_election_results[0].partition_result[0].error_code == \
        E["election_not_needed"]
    # All partitions: every topic is listed, without the partitions that need no election.
    r = client.call(43, 2, election_type=0, timeout=SECOND, topic_partitions=None)
    listed = {t.topic: t.partition_result for t in r.replica_election_results}
    assert listed[topic] == ()
    assert all(parts == () for parts in listed.values())


def test_describe_quorum_single_voter(any_broker, client):
    node = client.call(60, 0, include_cluster_authorized_operations=False).brokers[0].broker_id
    m = client.schema(55, 1)
    req = (m.TopicData(topic_name="__cluster_metadata",
                       partitions=(m.PartitionData(partition_index=0),)),)
    for v in (0, 1):
        r = client.call(55, v, topics=req)
        assert r.error_code == 0
        (t,) = r.topics
        (p,) = t.partitions
        assert (t.topic_name, p.partition_index, p.error_code, p.leader_id) == \
            ("__cluster_metadata", 0, 0, node)
        assert p.leader_epoch >= 1 and p.high_watermark >= 0 and p.observers == ()
        assert [s.replica_id for s in p.current_voters] == [node]
        if v == 1:
            assert p.current_voters[0].last_caught_up_timestamp > 0
    r = client.call(55, 1, topics=(m.TopicData(topic_name="other", partitions=(
        m.PartitionData(partition_index=0),)),))
    assert r.error_code == 0
    assert [(t.topic_name, p.partition_index, int(p.error_code)) for t in r.topics
            for p in t.partitions] == [("other", 0, E["unknown"])]
    assert client.call(55, 1, topics=()).topics == ()


def test_partition_reassignments(any_broker, client):
    topic, missing = _name("reas"), _name("no")
    create_topic(any_broker, topic, partitions=5)
    node = client.call(60, 0, include_cluster_authorized_operations=False).brokers[0].broker_id
    m = client.schema(45, 0)
    P = m.ReassignablePartition
    r = client.call(45, 0, timeout=SECOND, topics=(
        m.ReassignableTopic(name=topic, partitions=(
            P(partition_index=0, replicas=(node,)), P(partition_index=1, replicas=(node + 4,)),
            P(partition_index=2, replicas=None), P(partition_index=3, replicas=()),
            P(partition_index=4, replicas=(node, node)), P(partition_index=9, replicas=(node,)))),
        m.ReassignableTopic(name=missing, partitions=(P(partition_index=0, replicas=(node,)),))))
    assert (r.error_code, r.error_message) == (0, None)
    got = [(t.name, p.partition_index, int(p.error_code), p.error_message)
           for t in r.responses for p in t.partitions]
    pre = "The manual partition assignment includes"
    assert got == [
        (topic, 0, E["none"], None),
        (topic, 1, E["invalid_replica_assignment"],
         f"{pre} broker {node + 4}, but no such broker is registered."),
        (topic, 2, E["no_reassignment"], None),
        (topic, 3, E["invalid_replica_assignment"], f"{pre} an empty replica list."),
        (topic, 4, E["invalid_replica_assignment"], f"{pre} the broker {node} more than once."),
        (topic, 9, E["unknown"], f"Unable to find partition {topic}:9."),
        (missing, 0, E["unknown"], f"Unable to find a topic named {missing}.")]
    lm = client.schema(46, 0)
    for topics in (None, (lm.ListPartitionReassignmentsTopics(name=topic, partition_indexes=(0, 9)),
                          lm.ListPartitionReassignmentsTopics(name=missing,
                                                              partition_indexes=(0,)))):
        r = client.call(46, 0, timeout=SECOND, topics=topics)
        assert (r.error_code, r.error_message, r.topics) == (0, None, ())


def _dtp(c, topics, limit, cursor=None):
    m = c.schema(75, 0)
    r = c.call(75, 0, topics=tuple(m.TopicRequest(name=t) for t in topics),
               response_partition_limit=limit,
               cursor=None if cursor is None else m.Cursor(topic_name=cursor[0],
                                                           partition_index=cursor[1]))
    nxt = None if r.next_cursor is None else (r.next_cursor.topic_name,
                                              r.next_cursor.partition_index)
    return [(t.name, int(t.error_code), [p.partition_index for p in t.partitions])
            for t in r.topics], nxt, r


def test_describe_topic_partitions_cursor(any_broker, client):
    base = _name("dtp")
    a, b, gone = base + "-a", base + "-b", base + "-c"
    create_topic(any_broker, a, partitions=3)
    create_topic(any_broker, b, partitions=2)
    # Walk both topics two partitions at a time, as clients page through them.
    pages, cursor = [], None
    for _ in range(5):
        got, cursor, _r = _dtp(client, [b, a], 2, cursor)
        pages.append((got, cursor))
        if cursor is None:
            break
    assert pages == [([(a, 0, [0, 1])], (a, 2)),
                     ([(a, 0, [2]), (b, 0, [0])], (b, 1)),
                     ([(b, 0, [1])], None)]
    # The limit used up exactly before a topic: the cursor names that topic, existing or not.
    assert _dtp(client, [a, gone], 3)[:2] == ([(a, 0, [0, 1, 2])], (gone, 0))
    # Unknown and illegal names answer errors and take nothing from the limit; 0 counts as 1.
    got, nxt, r = _dtp(client, [a, gone, "bad/name"], 0)
    assert (got, nxt) == ([("bad/name", E["invalid_topic"], []), (a, 0, [0])], (a, 1))
    got, nxt, _r = _dtp(client, [a, gone], 5, (a, 2))
    assert (got, nxt) == ([(a, 0, [2]), (gone, E["unknown"], [])], None)
    ok = r.topics[[t.name for t in r.topics].index(a)]
    p = ok.partitions[0]
    assert (ok.is_internal, ok.topic_authorized_operations) == (False, 3576)
    assert (p.replica_nodes, p.isr_nodes, p.leader_epoch, p.offline_replicas,
            p.eligible_leader_replicas, p.last_known_elr) == \
        ((p.leader_id,), (p.leader_id,), 0, (), (), ())
    # A cursor past a topic's end lists it without partitions.
    assert _dtp(client, [a], 5, (a, 7))[:2] == ([(a, 0, [])], None)
    # A cursor naming a topic outside the list, or a negative partition: INVALID_REQUEST.
    for bad in ((gone + "x", 0), (a, -1)):
        got, nxt, r = _dtp(client, [a], 5, bad)
        assert (got, nxt) == ([(a, E["invalid_request"], [])], None)
        assert r.topics[0].topic_authorized_operations == -2147483648
    # The all-topics form lists existing topics only, sorted, from the cursor on.
    got, nxt, _r = _dtp(client, [], 2000, (a, 1))
    mine = [t for t in got if t[0].startswith(base)]
    assert mine == [(a, 0, [1, 2]), (b, 0, [0, 1])]


def test_list_offsets_highest_version(any_broker, client):
    topic = _name("lo")
    create_topic(any_broker, topic)
    top = {k.api_key: k.max_version for k in client.call(18, 3, client_software_name="t",
                                                        client_software_version="1").api_keys}[2]
    m = client.schema(2, top)

    def ask(*stamps):
        fields = dict(replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
            name=topic, partitions=tuple(m.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=ts) for ts in stamps)),))
        if top >= 10:
            fields["timeout"] = SECOND
        return [(int(p.error_code), p.offset) for p in client.call(2, top, **fields)
                .topics[0].partitions]

    assert [ask(ts) for ts in (-1, -2, -3)] == [[(0, 0)], [(0, 0)], [(0, -1)]]


def test_kafkalite_advertises_the_new_apis(kafka_broker):
    c = RawClient(kafka_broker)
    try:
        got = {k.api_key: (k.min_version, k.max_version) for k in c.call(
            18, 3, client_software_name="t", client_software_version="1").api_keys}
        m = c.schema(2, 10)
        r = c.call(2, 10, replica_id=-1, isolation_level=0, timeout=SECOND, topics=(
            m.ListOffsetsTopic(name="__nope", partitions=(m.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
        assert r.topics[0].partitions[0].error_code == E["unknown"]
    finally:
        c.close()
    assert {k: got.get(k) for k in (2, 34, 35, 43, 45, 46, 55, 75)} == {
        2: (1, 10), 34: (1, 2), 35: (1, 4), 43: (0, 2), 45: (0, 1), 46: (0, 0), 55: (0, 2),
        75: (0, 0)}
