# Session expiry through real clients (issue 10, item 9): kafka-python static members
# (group.instance.id) send no LeaveGroup when they close, so only their session timeout
# removes them. Each must go at its own deadline, not at the next tick of a once-a-second
# sweep: the three close a third of a second apart (in phase), so a sweep would be half a
# second late or more for at least one of them, whatever its phase. Membership is read with
# DescribeGroups v4 (which names each member's instance id); the group is then deleted with
# kafka-python's admin client.
from __future__ import annotations

import time
import uuid

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode as E

from .test_groups_helpers import RawClient, wait_for

SESSION_MS = 6000
HEARTBEAT_MS = 100  # so that a member's last heartbeat is at most this long before its close
STAGGER_S = 4 / 3  # closes at phases 0, 1/3 and 2/3 of a second
LATE_S = 0.3  # expiry + the DescribeGroups poll interval + scheduling on a loaded machine
POLL_S = 0.05


def _members(raw: RawClient, group: str) -> tuple[str, set[str]]:
    g = raw.call(15, 4, groups=(group,), include_authorized_operations=False).groups[0]
    assert g.error_code == E.none
    return g.group_state, {m.group_instance_id for m in g.members}


def test_static_members_expire_each_at_its_own_session_deadline(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=3)
    group = f"static-expiry-{uuid.uuid4().hex[:8]}"
    instances = [f"instance-{i}" for i in range(3)]
    consumers = [KafkaConsumer(topic, bootstrap_servers=kafka_broker, group_id=group,
                               group_instance_id=inst, client_id=inst,
                               session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                               enable_auto_commit=False)
                 for inst in instances]
    raw = RawClient(kafka_broker)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker, client_id="static-expiry-admin")
    open_consumers = list(consumers)
    try:
        def stable() -> bool:
            for c in consumers:
                c.poll(timeout_ms=50)
            return _members(raw, group) == ("Stable", set(instances)) \
                and sum(len(c.assignment()) for c in consumers) == 3
        wait_for(stable, 60, "three static members in a Stable group", interval=0)

        start = time.monotonic()
        closed: dict[str, tuple[float, float]] = {}  # instance -> (close began, close ended)
        gone: dict[str, float] = {}
        deadline = start + 2 * STAGGER_S + SESSION_MS / 1000 + 5
        while len(gone) < len(instances) and time.monotonic() < deadline:
            now = time.monotonic()
            n = len(closed)
            if n < len(consumers) and now >= start + n * STAGGER_S:
                began = time.monotonic()
                open_consumers.remove(consumers[n])
                consumers[n].close()
                closed[instances[n]] = (began, time.monotonic())
            _, present = _members(raw, group)
            for inst in closed.keys() - present - gone.keys():
                gone[inst] = time.monotonic()
            time.sleep(POLL_S)
        assert gone.keys() == set(instances), f"still members: {set(instances) - gone.keys()}"

        session = SESSION_MS / 1000
        for inst in instances:
            began, ended = closed[inst]
            assert gone[inst] - began >= session - HEARTBEAT_MS / 1000 - 0.1, \
                f"{inst} removed {gone[inst] - began:.3f}s after its close: before its deadline"
            assert gone[inst] - ended <= session + LATE_S, \
                f"{inst} removed {gone[inst] - ended:.3f}s after its close: late"
        assert _members(raw, group) == ("Empty", set())
        assert admin.delete_groups([group]) == {group: "OK"}
        assert time.monotonic() - closed[instances[-1]][1] < session + 1
    finally:
        for c in open_consumers:
            c.close()
        admin.close()
        raw.close()
