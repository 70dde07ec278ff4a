# Share-group membership across a SIGKILLed broker (Kafka 4.x keeps it in __consumer_offsets
# as ShareGroup* records): a confluent-kafka 2.16 ShareConsumer that stays open through the
# restart and a raw member (ShareGroupHeartbeat over a socket) that never heartbeats again.
# Right after the restart the group is listed as a share group and described with its epoch
# and both members; the consumer goes on with its member id and epoch; the raw member is
# fenced after the session timeout (the group epoch moves on); every record is accepted
# exactly once. kafkalite only: Kafka 3.8 serves no share groups.
from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.test_groups_helpers import RawClient
from tests.integration.test_share_groups import (ACCEPT, consumer, make_topic, poll_until,
                                                 produce, running_broker)

SESSION_MS = 6000
RECORDS = 100


@pytest.fixture
def broker():
    yield from running_broker({"group.share.session.timeout.ms": str(SESSION_MS)})


def describe(bootstrap: str, group: str, timeout: float = 20.0):
    """ShareGroupDescribe v1 of `group`, retried while the coordinator loads."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            (g,) = RawClient(bootstrap).call(77, 1, group_ids=(group,),
                                             include_authorized_operations=False).groups
        except (ConnectionError, OSError):
            g = None
        if g is not None and int(g.error_code) == 0:
            return g
        assert time.monotonic() < deadline, g
        time.sleep(0.1)


def listed(bootstrap: str) -> dict[str, str]:
    r = RawClient(bootstrap).call(16, 5, states_filter=(), types_filter=("share",))
    assert int(r.error_code) == 0
    return {g.group_id: g.group_type for g in r.groups}


def members(g) -> dict[str, int]:
    return {m.member_id: m.member_epoch for m in g.members}


def test_membership_survives_a_sigkill(broker):
    bs = broker.bootstrap
    topic, group = make_topic(bs)
    produce(bs, topic, RECORDS, per_batch=10)
    ghost = uuid.uuid4().hex
    r = RawClient(bs).call(76, 1, group_id=group, member_id=ghost, member_epoch=0,
                           subscribed_topic_names=(topic,))
    assert int(r.error_code) == 0
    c = consumer(bs, group, topic, explicit=True)
    accepted: list[int] = []

    def accept(_i, cons, m):
        cons.acknowledge(m, ACCEPT)
        accepted.append(m.offset())
    try:
        poll_until([c], lambda s: len(s) >= 40, 30, accept)
        c.commit_sync(10)
        before = describe(bs, group)
        assert ghost in members(before) and len(before.members) == 2
        broker.kill()
        broker.restart(hard=True)
        after = describe(bs, group)  # the consumer's session is still running
        assert listed(bs).get(group) == "share"
        assert after.group_epoch == before.group_epoch
        assert members(after) == members(before)
        # The consumer goes on as the same member; the raw one is fenced on its timeout.
        poll_until([c], lambda s: len(set(accepted)) >= RECORDS
                   and ghost not in members(describe(bs, group)),
                   SESSION_MS / 1000 + 30, accept)
        c.commit_sync(10)
        last = describe(bs, group)
        assert set(members(last)) == set(members(before)) - {ghost}
        assert last.group_epoch > before.group_epoch
    finally:
        c.close()
    assert sorted(accepted) == list(range(RECORDS)), "a record lost or accepted twice"
