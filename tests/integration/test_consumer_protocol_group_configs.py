# Per-group overrides of the KIP-848 timeouts (Kafka 4.x GroupConfig): IncrementalAlterConfigs
# on a GROUP resource (raw protocol) sets consumer.heartbeat.interval.ms and
# consumer.session.timeout.ms, bounded by the broker's group.consumer.min/max.* settings (here
# lowered, so Kafka's default bounds would refuse these values); the next
# ConsumerGroupHeartbeat answers the group's interval and the member's session runs on the
# group's timeout. No reference run: Kafka 3.8 has no GROUP config resource
# (test_group_configs.py pins that).
from __future__ import annotations

import time
import uuid
from datetime import timedelta

from kafkalite.testing import BrokerProcess
from tests.integration.test_consumer_protocol import GROUP_SETTINGS, SESSION_MS, create_topic
from tests.integration.test_consumer_protocol_restart import group_states
from tests.integration.test_group_configs import DEFAULT_CONFIG, GROUP_CONFIG, SET, alter, describe
from tests.integration.test_groups_helpers import RawClient

INVALID_CONFIG = 40


def heartbeat(c: RawClient, group: str, member: str, epoch: int):
    joining = epoch == 0
    return c.call(68, 1, group_id=group, member_id=member, member_epoch=epoch,
                  instance_id=None, rack_id=None,
                  rebalance_timeout=timedelta(milliseconds=30000 if joining else -1),
                  subscribed_topic_names=(TOPIC,) if joining else None,
                  subscribed_topic_regex=None, server_assignor=None,
                  topic_partitions=() if joining else None)


TOPIC = f"gc-{uuid.uuid4().hex[:8]}"


def test_group_timeouts_apply_to_its_members(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=GROUP_SETTINGS).start()
    c = RawClient(bp.bootstrap)
    group, member = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:22]
    try:
        create_topic(bp.bootstrap, TOPIC, 2)
        r = heartbeat(c, group, member, 0)
        assert (r.error_code, r.heartbeat_interval) == (0, timedelta(milliseconds=500))
        # The broker's bounds (min session 6000, min interval 500), not Kafka's defaults.
        assert alter(c, group, ("consumer.session.timeout.ms", SET, "5999")) == (
            INVALID_CONFIG, "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms")
        assert alter(c, group, ("consumer.heartbeat.interval.ms", SET, "499")) == (
            INVALID_CONFIG, "consumer.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms")
        session = SESSION_MS + 3000
        assert alter(c, group, ("consumer.heartbeat.interval.ms", SET, "700"),
                     ("consumer.session.timeout.ms", SET, str(session)))[0] == 0
        r = heartbeat(c, group, member, r.member_epoch)
        assert (r.error_code, r.heartbeat_interval) == (0, timedelta(milliseconds=700))
        last = time.monotonic()
        # Silent from now on: still a member past the broker's session timeout...
        time.sleep(SESSION_MS / 1000 + 1)
        assert group_states(bp.bootstrap)[group] == "Stable"
        # ...and fenced once the group's own has passed.
        deadline = last + session / 1000 + 20
        while group_states(bp.bootstrap)[group] != "Empty":
            assert time.monotonic() < deadline
            time.sleep(0.3)
    finally:
        c.close()
        bp.cleanup()


def test_defaults_described_are_the_brokers_settings(tmp_path):
    """Kafka 4.x's GroupConfig defaults come from the broker's config: a group without
    overrides describes the broker's group.consumer.* / group.share.* settings
    (DEFAULT_CONFIG), an override replaces one (GROUP_CONFIG)."""
    settings = {**GROUP_SETTINGS, "group.share.session.timeout.ms": "7000",
                "group.share.heartbeat.interval.ms": "800",
                "group.share.record.lock.duration.ms": "20000"}
    bp = BrokerProcess(data_dir=str(tmp_path / "data"), settings=settings).start()
    c = RawClient(bp.bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    try:
        want = {"consumer.session.timeout.ms": str(SESSION_MS),
                "consumer.heartbeat.interval.ms": "500",
                "share.session.timeout.ms": "7000", "share.heartbeat.interval.ms": "800",
                "share.record.lock.duration.ms": "20000",
                "share.auto.offset.reset": "latest"}
        entries = {e.name: e for e in describe(c, group).configs}
        assert {n: (entries[n].value, entries[n].config_source) for n in want} == \
            {n: (v, DEFAULT_CONFIG) for n, v in want.items()}
        assert alter(c, group, ("share.record.lock.duration.ms", SET, "16000"))[0] == 0
        e = {e.name: e for e in describe(c, group).configs}["share.record.lock.duration.ms"]
        assert (e.value, e.config_source) == ("16000", GROUP_CONFIG)
    finally:
        c.close()
        bp.cleanup()
