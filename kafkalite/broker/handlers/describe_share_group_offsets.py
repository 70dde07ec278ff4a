# DescribeShareGroupOffsets (key 90), v0-1.
#
# Each share-partition's start offset (SPSO) of the share groups named, for the topics named
# or (topics null) every share-partition the group has state for; v1 adds the lag (KIP-1226:
# high watermark minus the start offset minus the records past it whose delivery is
# complete). A partition the group has no state for, an unknown topic or partition
# included, answers start offset -1, leader epoch 0 and lag -1 with no error (an unknown
# topic with the zero topic id), as Kafka 4.x's describeShareGroupOffsets; an id that is
# no share group GROUP_ID_NOT_FOUND. Leader epoch is 0 (topics never change leader here,
# and Kafka writes the partition's leader epoch into the state).
# ACLs (Kafka 4.x KafkaApis.handleDescribeShareGroupOffsetsRequest): DESCRIBE on each group
# (GROUP_AUTHORIZATION_FAILED, no message), DESCRIBE on each topic (see the handler).
from __future__ import annotations

import uuid

from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import denied
from ...security.acls import Operation, ResourceType
from ._share import loading_error, not_share_group_error, other_group_type, share_coordinator


ZERO_UUID = uuid.UUID(int=0)


@api(90, "DescribeShareGroupOffsets", (0, 1))
async def handle(ctx, req):
    mod = response_module(90, ctx.api_version)
    broker = ctx.broker
    sc = share_coordinator(broker)
    topics = broker.logs.topics
    out = []
    refused = denied(ctx, Operation.DESCRIBE, ResourceType.GROUP,
                     (g.group_id for g in req.groups))
    for g in req.groups:
        gid = g.group_id
        if gid in refused:  # the code alone, as Kafka 4.x
            out.append(make(mod.DescribeShareGroupOffsetsResponseGroup, group_id=gid,
                            topics=(), error_code=E.group_authorization_failed))
            continue
        if sc.loading or other_group_type(broker, gid) is not None or not sc.has_group(gid):
            code, msg = loading_error(sc) or (
                not_share_group_error(gid) if other_group_type(broker, gid)
                else (E.group_id_not_found, f"Group {gid} not found."))
            out.append(make(mod.DescribeShareGroupOffsetsResponseGroup, group_id=gid,
                            topics=(), error_code=code, error_message=msg))
            continue
        state = sc.start_offsets(gid)
        # DESCRIBE on each topic (Kafka 4.x KafkaApis.describeShareGroupOffsetsForGroup /
        # describeShareGroupAllOffsetsForGroup): all of the group's topics leaves the refused
        # out silently; named topics refused answer TOPIC_AUTHORIZATION_FAILED, after the rest.
        if g.topics is None:
            wanted: dict[str, list[int]] = {}
            for (t, p) in sorted(state):
                wanted.setdefault(t, []).append(p)
            blind = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, wanted)
            wanted = {t: ps for t, ps in wanted.items() if t not in blind}
            hidden: list = []
        else:
            blind = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                           (t.topic_name for t in g.topics))
            wanted = {t.topic_name: list(t.partitions) for t in g.topics
                      if t.topic_name not in blind}
            hidden = [make(mod.DescribeShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                           topic_id=ZERO_UUID, partitions=tuple(make(
                               mod.DescribeShareGroupOffsetsResponsePartition,
                               partition_index=idx, start_offset=-1, leader_epoch=0,
                               error_code=E.topic_authorization_failed,
                               error_message="Topic authorization failed.")
                               for idx in t.partitions))
                      for t in g.topics if t.topic_name in blind]
        rtopics = []
        for name, parts in wanted.items():
            topic = topics.get(name)
            entries = []
            for idx in parts:
                # No state (an unknown topic or partition included) is absence of data, not
                # an error, as Kafka 4.x's describeShareGroupOffsets: start offset -1,
                # Kafka's default leader epoch 0, lag -1.
                start, done = state.get((name, idx), (-1, 0))
                lag = -1 if start < 0 or topic is None else max(
                    topic.partitions[idx].high_watermark - start - done, 0)
                entries.append(make(mod.DescribeShareGroupOffsetsResponsePartition,
                                    partition_index=idx, start_offset=start,
                                    leader_epoch=0, lag=lag, error_code=E.none))
            rtopics.append(make(mod.DescribeShareGroupOffsetsResponseTopic, topic_name=name,
                                topic_id=topic.topic_id if topic else ZERO_UUID,
                                partitions=tuple(entries)))
        out.append(make(mod.DescribeShareGroupOffsetsResponseGroup, group_id=gid,
                        topics=tuple(rtopics + hidden), error_code=E.none))
    return make(mod.DescribeShareGroupOffsetsResponse, throttle_time=ZERO, groups=tuple(out))
