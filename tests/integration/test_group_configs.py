# GROUP config resources (Kafka 4.0, KIP-848/KIP-932) in DescribeConfigs and
# IncrementalAlterConfigs. Kafka 3.8, the reference at hand, does not serve them (INVALID_REQUEST,
# pinned below for both brokers); kafkalite answers as Kafka 4.0's GroupConfig and ConfigHelper
# do: six configs, Kafka's bounds and messages, GROUP_CONFIG (8) / DEFAULT_CONFIG (5) sources,
# stored across a restart. Classic groups ignore them, in Kafka as in kafkalite.
from __future__ import annotations

import uuid

from tests.integration.test_groups_helpers import RawClient

GROUP, GROUP_CONFIG, DEFAULT_CONFIG = 32, 8, 5
SET, DELETE, APPEND = 0, 1, 2
NAMES = ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
         "share.auto.offset.reset", "share.heartbeat.interval.ms", "share.isolation.level",
         "share.record.lock.duration.ms", "share.session.timeout.ms"]


def describe(c, group):
    m = c.schema(32, 4)
    (r,) = c.call(32, 4, include_synonyms=True, include_documentation=True, resources=(
        m.DescribeConfigsResource(resource_type=GROUP, resource_name=group,
                                  configuration_keys=None),)).results
    return r


def alter(c, group, *ops, validate_only=False):
    m = c.schema(44, 1)
    (r,) = c.call(44, 1, validate_only=validate_only, resources=(m.AlterConfigsResource(
        resource_type=GROUP, resource_name=group, configs=tuple(
            m.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)),)
    ).responses
    return int(r.error_code), r.error_message


def test_group_resources_by_broker(any_broker, request):
    c = RawClient(any_broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    try:
        if request.node.callspec.params["any_broker"] == "kafka":  # 3.8: no GROUP resource
            assert describe(c, group).error_code == 42
            assert alter(c, group, ("consumer.session.timeout.ms", SET, "50000")) == \
                (42, "Unknown resource type 32")
            return
        r = describe(c, group)
        assert (r.error_code, r.error_message) == (0, "")
        assert [(e.name, e.value, e.config_source, e.synonyms, e.read_only, e.config_type)
                for e in r.configs] == [
            (n, v, DEFAULT_CONFIG, (), False, t) for n, v, t in zip(
                NAMES, ["5000", "45000", "latest", "5000", "read_uncommitted", "30000",
                        "45000"], [3, 3, 2, 3, 2, 3, 3])]
        bad = [
            (("consumer.session.timeout.ms", SET, "5"), "consumer.session.timeout.ms must be "
             "greater than or equal to group.consumer.min.session.timeout.ms"),
            (("consumer.session.timeout.ms", SET, "60001"), "consumer.session.timeout.ms must "
             "be less than or equal to group.consumer.max.session.timeout.ms"),
            (("consumer.heartbeat.interval.ms", SET, "16000"), "consumer.heartbeat.interval.ms"
             " must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
            (("share.record.lock.duration.ms", SET, "999"), "Invalid value 999 for "
             "configuration share.record.lock.duration.ms: Value must be at least 1000"),
            (("share.auto.offset.reset", SET, "none"), "Invalid value none for configuration "
             "share.auto.offset.reset: String must be one of: latest, earliest"),
            (("consumer.session.timeout.ms", SET, "abc"), "Invalid value abc for "
             "configuration consumer.session.timeout.ms: Not a number of type INT"),
            (("group.id", SET, "1"), "Unknown group config name: group.id"),
            (("consumer.session.timeout.ms", APPEND, "1"), "Can't APPEND to key "
             "consumer.session.timeout.ms because its type is not LIST."),
        ]
        for op, message in bad:
            assert alter(c, group, op) == (40, message), op
        assert alter(c, "", ("consumer.session.timeout.ms", SET, "50000"))[0] == 42
        assert alter(c, group, ("share.auto.offset.reset", SET, "earliest"),
                     validate_only=True) == (0, None)
        assert describe(c, group).configs[2].value == "latest"
        assert alter(c, group, ("consumer.session.timeout.ms", SET, "50000"),
                     ("share.auto.offset.reset", SET, "earliest")) == (0, None)
        got = {e.name: (e.value, e.config_source, [(s.name, s.value, s.source)
                                                   for s in e.synonyms])
               for e in describe(c, group).configs}
        assert got["consumer.session.timeout.ms"] == (
            "50000", GROUP_CONFIG, [("consumer.session.timeout.ms", "50000", GROUP_CONFIG)])
        assert got["share.auto.offset.reset"][:2] == ("earliest", GROUP_CONFIG)
        assert alter(c, group, ("share.auto.offset.reset", DELETE, None)) == (0, None)
        assert describe(c, group).configs[2].config_source == DEFAULT_CONFIG
    finally:
        c.close()


def test_group_configs_survive_a_restart(broker_process):
    c = RawClient(broker_process.bootstrap)
    assert alter(c, "durable", ("consumer.heartbeat.interval.ms", SET, "6000")) == (0, None)
    c.close()
    broker_process.restart()
    c = RawClient(broker_process.bootstrap)
    try:
        e = describe(c, "durable").configs[0]
        assert (e.name, e.value, e.config_source) == \
            ("consumer.heartbeat.interval.ms", "6000", GROUP_CONFIG)
    finally:
        c.close()
