# One group-id namespace for classic, KIP-848 consumer and KIP-932 share groups, by raw
# protocol (kio's codec) on a group a confluent-kafka ShareConsumer made, with the answers of
# Kafka 4.x's GroupMetadataManager: ListGroups v5 lists it with type and protocol type
# "share"; JoinGroup on its id answers INCONSISTENT_GROUP_PROTOCOL with an empty member id;
# ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND "Group X is not a consumer group."; DescribeGroups
# (v5) answers it Dead; SyncGroup, Heartbeat and LeaveGroup UNKNOWN_MEMBER_ID; DeleteGroups
# refuses it while it has members (NON_EMPTY_GROUP), then
# deletes it with its __share_group_state. The group is listed after a restart, before any
# share request: the share coordinator loads at broker start. kafkalite only: Kafka 3.8
# serves no share groups.
from __future__ import annotations

import datetime

from tests.helpers.real_kafka import eventually
from tests.integration.test_groups_helpers import RawClient
from tests.integration.test_share_groups import (consumer, make_topic, poll_until, produce,
                                                 share_broker)  # noqa: F401

INCONSISTENT_GROUP_PROTOCOL, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 23, 68, 69
UNKNOWN_MEMBER_ID = 25


def listed(c: RawClient, types=()) -> dict[str, tuple[str, str, str]] | None:
    """The groups ListGroups v5 answers, None while a coordinator loads."""
    r = c.call(16, 5, states_filter=(), types_filter=types)
    if int(r.error_code) != 0:
        return None
    return {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in r.groups}


def delete_group(c: RawClient, group: str) -> int:
    (r,) = c.call(42, 2, groups_names=(group,)).results
    return int(r.error_code)


def test_share_group_in_the_group_namespace(share_broker):  # noqa: F811
    bs = share_broker.bootstrap
    topic, group = make_topic(bs)
    produce(bs, topic, 5)
    c = RawClient(bs)
    sc = consumer(bs, group, topic)
    try:
        assert len(poll_until([sc], lambda s: len(s) >= 5, 30)) >= 5
        assert listed(c)[group] == ("share", "share", "Stable")
        assert group in listed(c, ("share",)) and group not in listed(c, ("classic",))

        m = c.schema(11, 9)
        r = c.call(11, 9, group_id=group, session_timeout=datetime.timedelta(seconds=10),
                   rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                   protocol_type="consumer",
                   protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),))
        assert (int(r.error_code), r.member_id) == (INCONSISTENT_GROUP_PROTOCOL, "")

        r = c.call(68, 1, group_id=group, member_id="m-1", member_epoch=0,
                   rebalance_timeout=datetime.timedelta(seconds=10),
                   subscribed_topic_names=(topic,), topic_partitions=())
        assert (int(r.error_code), r.error_message) == (
            GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group.")

        (d,) = c.call(15, 5, groups=(group,), include_authorized_operations=False).groups
        assert (int(d.error_code), d.group_state, d.members) == (0, "Dead", ())

        # The classic protocol's other requests: UNKNOWN_MEMBER_ID, LeaveGroup's for the
        # whole request (Kafka 4.x: "Group X not found." from the classic entry points).
        r = c.call(14, 5, group_id=group, generation_id=1, member_id="m-1",
                   group_instance_id=None, protocol_type="consumer", protocol_name="range",
                   assignments=())
        assert int(r.error_code) == UNKNOWN_MEMBER_ID
        r = c.call(12, 4, group_id=group, generation_id=1, member_id="m-1",
                   group_instance_id=None)
        assert int(r.error_code) == UNKNOWN_MEMBER_ID
        m = c.schema(13, 5)
        r = c.call(13, 5, group_id=group, members=(m.MemberIdentity(
            member_id="m-1", group_instance_id=None, reason=None),))
        assert (int(r.error_code), r.members) == (UNKNOWN_MEMBER_ID, ())
        assert listed(c)[group] == ("share", "share", "Stable")  # untouched
        assert delete_group(c, group) == NON_EMPTY_GROUP
    finally:
        sc.close()

    share_broker.restart()
    c = RawClient(share_broker.bootstrap)
    after = eventually(lambda: listed(c), lambda r: r is not None)
    assert after is not None and after.get(group) == ("share", "share", "Empty")
    assert delete_group(c, group) == 0
    assert group not in listed(c)
    m = c.schema(90, 1)
    (g,) = c.call(90, 1, groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None),)).groups
    assert int(g.error_code) == GROUP_ID_NOT_FOUND
    assert delete_group(c, group) == GROUP_ID_NOT_FOUND
