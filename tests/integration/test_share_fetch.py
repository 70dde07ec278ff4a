# ShareFetch (78) v1 by raw protocol: what a client meets when its piggybacked
# acknowledgements name a partition that has nothing new to deliver (every implicit-mode
# ShareConsumer does this once it has read a partition to its end). kafkalite only: Kafka 3.8
# serves no share groups.
from __future__ import annotations

import datetime
import uuid

from tests.integration.test_groups_helpers import RawClient
import confluent_kafka as ck

from tests.integration.test_share_groups import make_topic, share_broker  # noqa: F401

ACCEPT = 1


def topic_id(c: RawClient, topic: str) -> uuid.UUID:
    m = c.schema(3, 12)
    (t,) = c.call(3, 12, topics=(m.MetadataRequestTopic(topic_id=None, name=topic),),
                  allow_auto_topic_creation=False,
                  include_topic_authorized_operations=False).topics
    return t.topic_id


def share_fetch(c: RawClient, group: str, member: str, epoch: int, tid: uuid.UUID,
                acks: dict[int, list[tuple[int, int]]], partitions=(0, 1), wait_ms=200):
    m = c.schema(78, 1)
    parts = tuple(m.FetchPartition(partition_index=p, acknowledgement_batches=tuple(
        m.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=(ACCEPT,))
        for f, last in acks.get(p, ()))) for p in partitions)
    return c.call(78, 1, group_id=group, member_id=member, share_session_epoch=epoch,
                  max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
                  max_bytes=1 << 20, max_records=500, batch_size=500,
                  topics=(m.FetchTopic(topic_id=tid, partitions=parts),),
                  forgotten_topics_data=())


def test_acknowledgement_on_partition_with_nothing_new(share_broker):  # noqa: F811
    bs = share_broker.bootstrap
    topic, group = make_topic(bs, partitions=2)
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(10):
        p.produce(topic, b"%d" % i, partition=0)  # partition 1 stays empty
    assert p.flush(15) == 0
    c = RawClient(bs)
    tid, member = topic_id(c, topic), uuid.uuid4().hex
    assert int(c.call(76, 1, group_id=group, member_id=member, member_epoch=0,
                      subscribed_topic_names=(topic,)).error_code) == 0
    r = share_fetch(c, group, member, 0, tid, {}, wait_ms=5000)
    assert int(r.error_code) == 0
    got = {p.partition_index: p for t in r.responses for p in t.partitions
           if p.acquired_records}
    assert list(got) == [0]
    ranges = [(a.first_offset, a.last_offset) for a in got[0].acquired_records]
    assert ranges == [(0, 9)]

    # The partition is read to its end: the acknowledgement comes back with no records.
    r = share_fetch(c, group, member, 1, tid, {0: ranges})
    assert int(r.error_code) == 0
    (t,) = r.responses
    acked = {p.partition_index: p for p in t.partitions}
    assert int(acked[0].acknowledge_error_code) == 0
    assert acked[0].acquired_records == () and not acked[0].records
    # ...and the acknowledged records are done with: nothing more is delivered.
    r = share_fetch(c, group, member, 2, tid, {})
    assert [p for t in r.responses for p in t.partitions if p.acquired_records] == []
