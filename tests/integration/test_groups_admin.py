# Groups seen and managed through unmodified admin clients (kafka-python's KafkaAdminClient
# and confluent-kafka's AdminClient): DescribeGroups shows members, state and assignments,
# ListGroups lists and filters by state, OffsetDelete refuses offsets of a subscribed topic,
# DeleteGroups refuses a group with members (NON_EMPTY_GROUP) and deletes an empty one.
# Also: twenty groups consuming the same topic at once do not disturb each other.
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (Consumer, ConsumerGroupState, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KTP

from .test_groups_helpers import HEARTBEAT_MS, Worker, wait_for, wait_split


def _assigned(members: list[dict]) -> list[int]:
    return sorted(p for m in members for a in m["member_assignment"]["assigned_partitions"]
                  for p in a["partitions"])


def test_describe_list_and_delete_groups_through_admin_clients(kafka_broker, kafka_topic,
                                                                tmp_path):
    topic, other = kafka_topic(partitions=4), kafka_topic(partitions=1)
    group = f"admin-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": kafka_broker})
    for i in range(40):
        p.produce(topic, b"%d" % i, partition=i % 4)
    p.produce(other, b"x")
    assert p.flush(30) == 0
    workers = [Worker("confluent", kafka_broker, topic, group, tmp_path / f"a{i}.jsonl",
                      name=f"member-{i}") for i in range(2)]
    ka = KafkaAdminClient(bootstrap_servers=kafka_broker, client_id="groups-admin")
    ca = AdminClient({"bootstrap.servers": kafka_broker})
    try:
        wait_split(workers, 4, 60, "two members")
        wait_for(lambda: sum(1 for w in workers for e in w.events() if e["ev"] == "commit")
                 >= 4, 30, "the members to commit what they consumed")

        d = ka.describe_groups([group])[group]
        assert d["error"] is None and d["group_state"] == "Stable"
        assert d["protocol_type"] == "consumer" and d["protocol_data"] == "range"
        assert sorted(m["client_id"] for m in d["members"]) == ["member-0", "member-1"]
        assert all(m["client_host"] == "/127.0.0.1" for m in d["members"])
        assert all(m["member_metadata"]["topics"] == [topic] for m in d["members"])
        assert _assigned(d["members"]) == [0, 1, 2, 3]
        by_client = {m["client_id"]: m["member_assignment"]["assigned_partitions"][0]["partitions"]
                     for m in d["members"]}
        assert by_client == {f"member-{i}": workers[i].assignment() for i in range(2)}

        cd = ca.describe_consumer_groups([group])[group].result()
        assert cd.state == ConsumerGroupState.STABLE and cd.partition_assignor == "range"
        assert sorted((m.client_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                      for m in cd.members) == [(f"member-{i}", workers[i].assignment())
                                               for i in range(2)]

        assert {g["group_id"]: g["group_state"] for g in ka.list_groups()}[group] == "Stable"
        assert group in {g["group_id"] for g in ka.list_groups(states_filter=["stable"])}
        assert group not in {g["group_id"] for g in ka.list_groups(states_filter=["Empty"])}
        listed = ca.list_consumer_groups(states={ConsumerGroupState.STABLE}).result()
        assert group in {g.group_id for g in listed.valid}

        # A group with members cannot be deleted.
        assert ka.delete_groups([group])[group] == "NonEmptyGroupError"
        with pytest.raises(KafkaException) as exc:
            ca.delete_consumer_groups([group])[group].result()
        assert exc.value.args[0].name() == "NON_EMPTY_GROUP"

        # OffsetDelete: refused for the topic the members consume, allowed for another one.
        c = Consumer({"bootstrap.servers": kafka_broker, "group.id": group})
        offs = [TopicPartition(topic, 0, 0), TopicPartition(other, 0, 1)]
        with pytest.raises(KafkaException):  # the group has members: a simple commit fails
            c.commit(offsets=offs, asynchronous=False)
        c.close()
        res = ka.delete_group_offsets(group, [KTP(topic, 0), KTP(other, 0)])
        assert res[KTP(topic, 0)].__name__ == "GroupSubscribedToTopicError"
        assert res[KTP(other, 0)].__name__ == "NoError"
    finally:
        for w in workers:
            w.stop()

    try:
        wait_for(lambda: ka.describe_groups([group])[group]["group_state"] == "Empty", 30,
                 "the group to become empty")
        assert ka.list_group_offsets({group: None})[group]  # the members committed offsets
        assert ca.delete_consumer_groups([group])[group].result() is None
        d = ka.describe_groups([group])[group]
        assert d["group_state"] == "Dead" and d["members"] == []
        assert group not in {g["group_id"] for g in ka.list_groups()}
        assert ka.list_group_offsets({group: None})[group] == {}
        assert ka.delete_groups([group])[group] == "GroupIdNotFoundError"
    finally:
        ka.close()


def test_twenty_groups_on_one_topic_do_not_disturb_each_other(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=4)
    records = 2000
    p = Producer({"bootstrap.servers": kafka_broker, "linger.ms": 5})
    for i in range(records):
        p.produce(topic, value=b"%d" % i, partition=i % 4)
    assert p.flush(30) == 0

    tag = uuid.uuid4().hex[:6]
    groups = [f"twenty-{tag}-{g}" for g in range(20)]
    events: dict[tuple[int, int], list[str]] = {}
    seen: dict[int, set[tuple[int, int]]] = {g: set() for g in range(20)}
    consumers: dict[tuple[int, int], Consumer] = {}

    def make(g: int, m: int) -> Consumer:
        key = (g, m)
        events[key] = []
        c = Consumer({"bootstrap.servers": kafka_broker, "group.id": groups[g],
                      "client.id": f"g{g}m{m}", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": HEARTBEAT_MS})
        c.subscribe([topic], on_assign=lambda _c, ps: events[key].append("assign"),
                    on_revoke=lambda _c, ps: events[key].append("revoke"))
        return c

    def poll_all(rounds: int) -> None:
        for _ in range(rounds):
            for (g, m), c in list(consumers.items()):
                msgs = [x for x in c.consume(200, 0) if not x.error()]
                for x in msgs:
                    seen[g].add((x.partition(), x.offset()))
                if msgs:
                    c.commit(asynchronous=False)
            time.sleep(0.01)

    try:
        for g in range(20):
            for m in range(2):
                consumers[(g, m)] = make(g, m)
        ka = KafkaAdminClient(bootstrap_servers=kafka_broker, client_id="twenty")

        def settled() -> bool:
            poll_all(5)
            ds = ka.describe_groups(groups)
            owned = {g: sorted(tp.partition for m in range(2)
                               for tp in consumers[(g, m)].assignment()) for g in range(20)}
            return all(d["group_state"] == "Stable" and len(d["members"]) == 2
                       and _assigned(d["members"]) == [0, 1, 2, 3] for d in ds.values()) \
                and all(o == [0, 1, 2, 3] for o in owned.values()) \
                and all(len(s) == records for s in seen.values())
        wait_for(settled, 120, "20 stable groups that each consumed every record", 0)

        # One group loses a member: only that group rebalances.
        marks = {k: len(v) for k, v in events.items()}
        consumers.pop((0, 1)).close()
        wait_for(lambda: (poll_all(5), len(ka.describe_groups([groups[0]])[groups[0]]
                                           ["members"]) == 1)[1], 60, "group 0 to shrink", 0)
        poll_all(int(3 * HEARTBEAT_MS / 10))  # other groups would have noticed by now
        disturbed = {k: v[marks[k]:] for k, v in events.items()
                     if k[0] != 0 and k in consumers and v[marks[k]:]}
        assert not disturbed, disturbed
        ds = ka.describe_groups(groups)
        assert all(ds[groups[g]]["group_state"] == "Stable" for g in range(20))
        offsets = ka.list_group_offsets({g: None for g in groups})
        for g in groups:
            assert sum(om.offset for om in offsets[g].values()) == records, g
        ka.close()
    finally:
        for c in consumers.values():
            c.close()
