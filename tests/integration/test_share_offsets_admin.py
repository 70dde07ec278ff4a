# The share-group offset admin APIs by raw protocol (kio's codec): DescribeShareGroupOffsets
# (90) v0/v1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets (92) v0, on state a
# confluent-kafka ShareConsumer made; Kafka's errors (NON_EMPTY_GROUP while members are
# there, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION). kafkalite only: Kafka 3.8 serves
# no share groups.
from __future__ import annotations

from tests.integration.test_groups_helpers import RawClient
from tests.integration.test_share_groups import (ACCEPT, RELEASE, consumer, make_topic,
                                                 poll_until, produce, share_broker)  # noqa: F401

NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 68, 69, 3


def describe(c: RawClient, group: str, topic: str | None, version: int = 1):
    m = c.schema(90, version)
    topics = None if topic is None else (m.DescribeShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=(0,)),)
    (g,) = c.call(90, version, groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=topics),)).groups
    return g


def alter(c: RawClient, group: str, topic: str, offset: int):
    m = c.schema(91, 0)
    return c.call(91, 0, group_id=group, topics=(m.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=(m.AlterShareGroupOffsetsRequestPartition(
            partition_index=0, start_offset=offset),)),))


def delete(c: RawClient, group: str, topic: str):
    m = c.schema(92, 0)
    return c.call(92, 0, group_id=group, topics=(m.DeleteShareGroupOffsetsRequestTopic(
        topic_name=topic),))


def test_describe_alter_delete(share_broker):  # noqa: F811
    bs = share_broker.bootstrap
    topic, group = make_topic(bs)
    produce(bs, topic, 10, per_batch=1)  # one record per batch: acquisitions of one
    c = RawClient(bs)
    sc = consumer(bs, group, topic, explicit=True)
    try:
        poll_until([sc], lambda s: len(s) >= 10, 30, lambda _i, cons, m: cons.acknowledge(
            m, ACCEPT if m.offset() < 4 else RELEASE))
        sc.commit_sync(10)
        r = alter(c, group, topic, 8)
        assert (int(r.error_code), r.responses) == (NON_EMPTY_GROUP, ())
        assert int(delete(c, group, topic).error_code) == NON_EMPTY_GROUP
    finally:
        sc.close()
    g = describe(c, group, topic)
    (t,) = g.topics
    (p,) = t.partitions
    assert (int(g.error_code), t.topic_name, p.partition_index) == (0, topic, 0)
    assert (p.start_offset, p.lag, int(p.error_code)) == (4, 6, 0)
    assert describe(c, group, None, version=0).topics[0].partitions[0].start_offset == 4

    r = alter(c, group, topic, 8)
    assert int(r.error_code) == 0 and int(r.responses[0].partitions[0].error_code) == 0
    assert describe(c, group, topic).topics[0].partitions[0].start_offset == 8
    again = consumer(bs, group, topic, explicit=True)
    try:
        got = poll_until([again], lambda s: len(s) >= 2, 30,
                         lambda _i, cons, m: cons.acknowledge(m, ACCEPT))
        got += poll_until([again], lambda s: False, 2)
        assert sorted(m.offset() for _, m in got) == [8, 9]
        again.commit_sync(10)
    finally:
        again.close()

    r = delete(c, group, "no-such-topic")
    assert int(r.responses[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
    r = delete(c, group, topic)
    assert (int(r.error_code), int(r.responses[0].error_code)) == (0, 0)
    (p,) = describe(c, group, topic).topics[0].partitions
    assert (p.start_offset, p.leader_epoch, p.lag, int(p.error_code)) == (-1, 0, -1, 0)
    # An unknown topic is absence of data, not an error, as in Kafka 4.x (kio reads the zero
    # topic id as None)
    (t,) = describe(c, group, "no-such-topic").topics
    (p,) = t.partitions
    assert (t.topic_id, p.start_offset, p.leader_epoch, int(p.error_code)) == (None, -1, 0, 0)
    assert int(describe(c, "no-such-group", None).error_code) == GROUP_ID_NOT_FOUND
    r = alter(c, group, "no-such-topic", 0)
    assert int(r.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
